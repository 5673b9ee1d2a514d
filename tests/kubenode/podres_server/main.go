// SPDX-License-Identifier: Apache-2.0
//
// podres_server - a test kubelet for gpuqos: serves the pod-resources v1
// List RPC (grpc-go, generated from proto/podresources_v1.proto) on a unix
// socket, with a canned answer or a chosen failure. It owns nothing of
// gpuqos; tests/kubenode/test_podres.c starts, kills and restarts it.
//
// Like a kubelet, it deletes a stale socket before listening, so a
// restart on the same path is seen as a delete and a create.
//
// Modes: ok (the -response JSON), big (an answer of about -big bytes),
// garbage (bytes that are not a ListPodResourcesResponse), hang (never
// answers), error (PERMISSION_DENIED). -listen-delay leaves a gap between
// the socket file appearing and the server accepting, as a kubelet does.
package main

import (
	"context"
	"flag"
	"fmt"
	"io/ioutil"
	"log"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/golang/protobuf/jsonpb"
	"github.com/golang/protobuf/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "gpuqos.test/podres_server/v1"
)

var (
	socket   = flag.String("socket", "", "unix socket path to serve on")
	response = flag.String("response", "", "ListPodResourcesResponse as JSON (mode ok)")
	mode     = flag.String("mode", "ok", "ok, big, garbage, hang or error")
	bigSize  = flag.Int("big", 1<<20, "approximate answer size in bytes (mode big)")
	lateMs   = flag.Int("listen-delay", 0, "milliseconds between bind (the socket file appears) and listen")
)

// garbage is not a protobuf message: a field 1 with length-delimited wire
// type whose length runs far past the end of the message.
var garbage = []byte{0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x02}

// codec is the proto codec, except that in garbage mode a List answer is
// replaced on the wire by bytes no decoder can accept.
type codec struct{}

func (codec) Marshal(v interface{}) ([]byte, error) {
	if _, ok := v.(*pb.ListPodResourcesResponse); ok && *mode == "garbage" {
		return garbage, nil
	}
	return proto.Marshal(v.(proto.Message))
}

func (codec) Unmarshal(data []byte, v interface{}) error {
	return proto.Unmarshal(data, v.(proto.Message))
}

func (codec) String() string { return "proto" }

type lister struct {
	answer *pb.ListPodResourcesResponse
}

func (l *lister) List(ctx context.Context, _ *pb.ListPodResourcesRequest) (*pb.ListPodResourcesResponse, error) {
	log.Printf("List (mode %s)", *mode)
	switch *mode {
	case "hang":
		// Never answers: whatever ends the call is the client's deadline
		// or cancel, said as the status a client sees for it (a bare
		// ctx.Err() would reach the client as UNKNOWN when it wins the
		// race with the client's own deadline).
		<-ctx.Done()
		if ctx.Err() == context.DeadlineExceeded {
			return nil, status.Error(codes.DeadlineExceeded, ctx.Err().Error())
		}
		return nil, status.Error(codes.Canceled, ctx.Err().Error())
	case "error":
		return nil, status.Error(codes.PermissionDenied, "test kubelet refuses List")
	}
	return l.answer, nil
}

func bigAnswer(size int) *pb.ListPodResourcesResponse {
	r := &pb.ListPodResourcesResponse{}
	name := strings.Repeat("x", 200)
	for n := 0; n < size; n += 260 {
		r.PodResources = append(r.PodResources, &pb.PodResources{
			Name: fmt.Sprintf("big-%d-%s", n, name), Namespace: "default",
			Containers: []*pb.ContainerResources{{Name: "main", Devices: []*pb.ContainerDevices{
				{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-0"}}}}},
		})
	}
	return r
}

func loadAnswer() *pb.ListPodResourcesResponse {
	r := &pb.ListPodResourcesResponse{}
	if *mode == "big" {
		return bigAnswer(*bigSize)
	}
	if *response == "" {
		return r
	}
	b, err := ioutil.ReadFile(*response)
	if err != nil {
		log.Fatalf("%s: %v", *response, err)
	}
	if err := jsonpb.UnmarshalString(string(b), r); err != nil {
		log.Fatalf("%s: %v", *response, err)
	}
	return r
}

// listen binds and, after a delay, listens: the socket file exists before
// anyone can connect to it, as with a kubelet that is still starting.
func listen(path string, delay time.Duration) (net.Listener, error) {
	if delay == 0 {
		return net.Listen("unix", path)
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	log.Printf("bound %s, listening in %v", path, delay)
	time.Sleep(delay)
	if err := syscall.Listen(fd, 128); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	return net.FileListener(f)
}

func main() {
	flag.Parse()
	log.SetPrefix("podres_server: ")
	if *socket == "" {
		log.Fatal("-socket is required")
	}
	answer := loadAnswer()
	if err := os.Remove(*socket); err != nil && !os.IsNotExist(err) {
		log.Fatalf("remove %s: %v", *socket, err)
	}
	lis, err := listen(*socket, time.Duration(*lateMs)*time.Millisecond)
	if err != nil {
		log.Fatalf("listen %s: %v", *socket, err)
	}
	srv := grpc.NewServer(grpc.CustomCodec(codec{}))
	pb.RegisterPodResourcesListerServer(srv, &lister{answer: answer})
	log.Printf("serving on %s, mode %s, %d pods", *socket, *mode, len(answer.PodResources))
	if err := srv.Serve(lis); err != nil {
		log.Fatalf("serve: %v", err)
	}
}
