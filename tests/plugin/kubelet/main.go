// SPDX-License-Identifier: Apache-2.0
//
// kubelet - a test kubelet for gpuqos-device-plugin, on grpc-go (the
// transport the real kubelet uses), generated from
// proto/deviceplugin_v1beta1.proto. It serves Registration.Register on
// <dir>/kubelet.sock and acts as the kubelet's device manager towards the
// plugins that register: GetDevicePluginOptions, ListAndWatch,
// GetPreferredAllocation, Allocate, raw bytes on any method.
//
// tests/plugin/test_plugin.py drives it with one JSON command per line on
// stdin; each gets one JSON answer line on stdout. Like a real kubelet,
// "restart" removes every socket in the directory and recreates its own.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/ioutil"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	pb "gpuqos.test/kubelet/v1beta1"
)

var dir = flag.String("dir", "", "device-plugin directory (kubelet.sock goes there)")

// Generous: the plugin may run under valgrind on a loaded machine.
const rpcTimeout = 30 * time.Second

type registration struct {
	Version   string `json:"version"`
	Endpoint  string `json:"endpoint"`
	Resource  string `json:"resource"`
	Preferred bool   `json:"preferred"`
	AtMs      int64  `json:"at_ms"`
}

type kubelet struct {
	mu   sync.Mutex
	regs []registration
	cond *sync.Cond
	srv  *grpc.Server
}

func (k *kubelet) Register(ctx context.Context, r *pb.RegisterRequest) (*pb.Empty, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	reg := registration{Version: r.Version, Endpoint: r.Endpoint, Resource: r.ResourceName,
		AtMs: time.Now().UnixNano() / 1e6}
	if r.Options != nil {
		reg.Preferred = r.Options.GetPreferredAllocationAvailable
	}
	k.regs = append(k.regs, reg)
	k.cond.Broadcast()
	return &pb.Empty{}, nil
}

func (k *kubelet) serve() error {
	sock := filepath.Join(*dir, "kubelet.sock")
	os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	k.srv = grpc.NewServer()
	pb.RegisterRegistrationServer(k.srv, k)
	go k.srv.Serve(l)
	return nil
}

// What a kubelet does when it starts: every socket in the directory goes.
func (k *kubelet) restart() error {
	if k.srv != nil {
		k.srv.Stop()
	}
	files, _ := ioutil.ReadDir(*dir)
	for _, f := range files {
		if f.Mode()&os.ModeSocket != 0 {
			os.Remove(filepath.Join(*dir, f.Name()))
		}
	}
	return k.serve()
}

type stream struct {
	cancel context.CancelFunc
	ch     chan map[string]interface{}
}

var (
	streams   = map[int]*stream{}
	nextID    = 1
	conns     = map[string]*grpc.ClientConn{}
	stalled   []stalledStream
	kub       = &kubelet{}
	rawCodecV rawCodec
)

// A ListAndWatch stream nobody reads, on a connection of its own whose
// flow-control window stays at the HTTP/2 minimum (no BDP growth).
type stalledStream struct {
	cancel context.CancelFunc
	conn   *grpc.ClientConn
	s      pb.DevicePlugin_ListAndWatchClient
}

type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error)      { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v interface{}) error { *(v.(*[]byte)) = data; return nil }
func (rawCodec) Name() string                               { return "proto" }

func conn(endpoint string) (*grpc.ClientConn, error) {
	if c, ok := conns[endpoint]; ok {
		return c, nil
	}
	c, err := grpc.Dial("unix://"+filepath.Join(*dir, endpoint), grpc.WithInsecure(),
		grpc.WithBlock(), grpc.WithTimeout(rpcTimeout))
	if err != nil {
		return nil, err
	}
	conns[endpoint] = c
	return c, nil
}

func fail(err error) map[string]interface{} {
	st, _ := status.FromError(err)
	return map[string]interface{}{"ok": false, "code": int(st.Code()), "error": st.Message()}
}

func devices(r *pb.ListAndWatchResponse) []map[string]interface{} {
	out := []map[string]interface{}{}
	for _, d := range r.Devices {
		numa := []int64{}
		if d.Topology != nil {
			for _, n := range d.Topology.Nodes {
				numa = append(numa, n.ID)
			}
		}
		out = append(out, map[string]interface{}{"id": d.ID, "health": d.Health, "numa": numa})
	}
	return out
}

func watch(c *grpc.ClientConn) map[string]interface{} {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := pb.NewDevicePluginClient(c).ListAndWatch(ctx, &pb.Empty{})
	if err != nil {
		cancel()
		return fail(err)
	}
	st := &stream{cancel: cancel, ch: make(chan map[string]interface{}, 1000)}
	go func() {
		for {
			r, err := s.Recv()
			if err != nil {
				m := fail(err)
				m["end"] = true
				st.ch <- m
				return
			}
			st.ch <- map[string]interface{}{"ok": true, "devices": devices(r),
				"at_ms": time.Now().UnixNano() / 1e6}
		}
	}()
	id := nextID
	nextID++
	streams[id] = st
	first := <-st.ch
	first["stream"] = id
	return first
}

func next(id int, timeoutMs int) map[string]interface{} {
	st, ok := streams[id]
	if !ok {
		return map[string]interface{}{"ok": false, "error": "no such stream"}
	}
	select {
	case m := <-st.ch:
		return m
	case <-time.After(time.Duration(timeoutMs) * time.Millisecond):
		return map[string]interface{}{"ok": false, "error": "timeout"}
	}
}

func allocate(c *grpc.ClientConn, containers [][]string) map[string]interface{} {
	req := &pb.AllocateRequest{}
	for _, ids := range containers {
		req.ContainerRequests = append(req.ContainerRequests, &pb.ContainerAllocateRequest{DevicesIds: ids})
	}
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	r, err := pb.NewDevicePluginClient(c).Allocate(ctx, req)
	if err != nil {
		return fail(err)
	}
	out := []map[string]interface{}{}
	for _, cr := range r.ContainerResponses {
		mounts := []map[string]interface{}{}
		for _, m := range cr.Mounts {
			mounts = append(mounts, map[string]interface{}{"container_path": m.ContainerPath,
				"host_path": m.HostPath, "read_only": m.ReadOnly})
		}
		devs := []map[string]interface{}{}
		for _, d := range cr.Devices {
			devs = append(devs, map[string]interface{}{"container_path": d.ContainerPath,
				"host_path": d.HostPath, "permissions": d.Permissions})
		}
		cdi := []string{}
		for _, d := range cr.CdiDevices {
			cdi = append(cdi, d.Name)
		}
		envs := cr.Envs
		if envs == nil {
			envs = map[string]string{}
		}
		out = append(out, map[string]interface{}{"envs": envs, "mounts": mounts, "devices": devs,
			"cdi": cdi, "annotations": cr.Annotations})
	}
	return map[string]interface{}{"ok": true, "containers": out}
}

type prefReq struct {
	Available []string `json:"available"`
	Must      []string `json:"must"`
	Size      int32    `json:"size"`
}

func preferred(c *grpc.ClientConn, reqs []prefReq) map[string]interface{} {
	req := &pb.PreferredAllocationRequest{}
	for _, q := range reqs {
		req.ContainerRequests = append(req.ContainerRequests, &pb.ContainerPreferredAllocationRequest{
			AvailableDeviceIDs: q.Available, MustIncludeDeviceIDs: q.Must, AllocationSize: q.Size})
	}
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	r, err := pb.NewDevicePluginClient(c).GetPreferredAllocation(ctx, req)
	if err != nil {
		return fail(err)
	}
	out := [][]string{}
	for _, cr := range r.ContainerResponses {
		out = append(out, cr.DeviceIDs)
	}
	return map[string]interface{}{"ok": true, "containers": out}
}

func raw(c *grpc.ClientConn, method string, data []byte) map[string]interface{} {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	var reply []byte
	err := c.Invoke(ctx, method, &data, &reply, grpc.ForceCodec(rawCodecV),
		grpc.MaxCallSendMsgSize(64<<20))
	if err != nil {
		return fail(err)
	}
	return map[string]interface{}{"ok": true, "bytes": len(reply)}
}

// A ListAndWatch stream that is opened and never read from.
func stall(endpoint string) map[string]interface{} {
	c, err := grpc.Dial("unix://"+filepath.Join(*dir, endpoint), grpc.WithInsecure(),
		grpc.WithBlock(), grpc.WithTimeout(rpcTimeout),
		grpc.WithInitialWindowSize(65535), grpc.WithInitialConnWindowSize(65535))
	if err != nil {
		return map[string]interface{}{"ok": false, "error": err.Error()}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := pb.NewDevicePluginClient(c).ListAndWatch(ctx, &pb.Empty{})
	if err != nil {
		cancel()
		c.Close()
		return fail(err)
	}
	// The call goes out lazily, on a connection of its own: wait for the
	// plugin's headers (they come with its first message), so that the
	// stream is open on the plugin's side before this op answers and an op
	// on another connection comes after it.
	hdr := make(chan error, 1)
	go func() {
		_, err := s.Header()
		hdr <- err
	}()
	select {
	case err = <-hdr:
	case <-time.After(rpcTimeout):
		err = fmt.Errorf("no headers from the plugin in %v", rpcTimeout)
	}
	if err != nil {
		cancel()
		c.Close()
		return fail(err)
	}
	stalled = append(stalled, stalledStream{cancel, c, s})
	return map[string]interface{}{"ok": true, "stream": len(stalled) - 1}
}

// Calls that are opened and never send their request, as a client that
// stopped would leave them: each is one call in flight on the plugin.
type pendingCall struct {
	cancel context.CancelFunc
	conn   *grpc.ClientConn
}

var pendingCalls []pendingCall

// Opens n Allocate calls that send nothing (on connections of their own,
// 32 calls each: the plugin lets one connection have 64 streams) and
// waits up to timeoutMs for `refused` of them to be answered
// RESOURCE_EXHAUSTED at once. How many were refused and how many stay
// open.
func pending(endpoint string, n, refused, timeoutMs int) map[string]interface{} {
	var c *grpc.ClientConn
	var err error
	done := make(chan error, n)
	desc := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
	for i := 0; i < n; i++ {
		if i%32 == 0 {
			c, err = grpc.Dial("unix://"+filepath.Join(*dir, endpoint), grpc.WithInsecure(),
				grpc.WithBlock(), grpc.WithTimeout(rpcTimeout))
			if err != nil {
				return map[string]interface{}{"ok": false, "error": err.Error()}
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		pendingCalls = append(pendingCalls, pendingCall{cancel, c})
		s, err := c.NewStream(ctx, desc, "/v1beta1.DevicePlugin/Allocate", grpc.ForceCodec(rawCodecV))
		if err != nil {
			return fail(err)
		}
		go func() {
			var reply []byte
			done <- s.RecvMsg(&reply)
		}()
	}
	got, other := 0, []string{}
	deadline := time.After(time.Duration(timeoutMs) * time.Millisecond)
	for got < refused {
		select {
		case err := <-done:
			if status.Code(err) == 8 {
				got++
			} else {
				other = append(other, fmt.Sprint(err))
			}
		case <-deadline:
			return map[string]interface{}{"ok": true, "refused": got, "other": other}
		}
	}
	// anything more answered shows in a short while
	select {
	case err := <-done:
		other = append(other, fmt.Sprint(err))
	case <-time.After(300 * time.Millisecond):
	}
	return map[string]interface{}{"ok": true, "refused": got, "other": other}
}

func releasePending() {
	seen := map[*grpc.ClientConn]bool{}
	for _, p := range pendingCalls {
		p.cancel()
		if !seen[p.conn] {
			seen[p.conn] = true
			p.conn.Close()
		}
	}
	pendingCalls = nil
}

// Reads a stalled stream at last: how it ended (or "open" after timeoutMs).
func stallResult(i, timeoutMs int) map[string]interface{} {
	if i < 0 || i >= len(stalled) {
		return map[string]interface{}{"ok": false, "error": "no such stream"}
	}
	done := make(chan map[string]interface{}, 1)
	go func() {
		n := 0
		for {
			if _, err := stalled[i].s.Recv(); err != nil {
				m := fail(err)
				m["messages"] = n
				done <- m
				return
			}
			n++
		}
	}()
	select {
	case m := <-done:
		return m
	case <-time.After(time.Duration(timeoutMs) * time.Millisecond):
		return map[string]interface{}{"ok": false, "error": "open"}
	}
}

// Reads a stalled stream until nothing came for idleMs: per message, the
// number of devices and the Unhealthy ones.
func stallRead(i, idleMs int) map[string]interface{} {
	if i < 0 || i >= len(stalled) {
		return map[string]interface{}{"ok": false, "error": "no such stream"}
	}
	msgs := make(chan *pb.ListAndWatchResponse, 100)
	go func(s pb.DevicePlugin_ListAndWatchClient) {
		for {
			r, err := s.Recv()
			if err != nil {
				close(msgs)
				return
			}
			msgs <- r
		}
	}(stalled[i].s)
	out := []map[string]interface{}{}
	for {
		select {
		case r, ok := <-msgs:
			if !ok {
				return map[string]interface{}{"ok": true, "messages": out, "ended": true}
			}
			bad := []string{}
			for _, d := range r.Devices {
				if d.Health != "Healthy" {
					bad = append(bad, d.ID)
				}
			}
			out = append(out, map[string]interface{}{"devices": len(r.Devices), "unhealthy": bad})
		case <-time.After(time.Duration(idleMs) * time.Millisecond):
			return map[string]interface{}{"ok": true, "messages": out}
		}
	}
}

type command struct {
	Op         string     `json:"op"`
	N          int        `json:"n"`
	TimeoutMs  int        `json:"timeout_ms"`
	Endpoint   string     `json:"endpoint"`
	Stream     int        `json:"stream"`
	Containers [][]string `json:"containers"`
	Requests   []prefReq  `json:"requests"`
	Method     string     `json:"method"`
	Refused    int        `json:"refused"`
	Data       []byte     `json:"data"`
}

func waitRegister(n, timeoutMs int) map[string]interface{} {
	deadline := time.Now().Add(time.Duration(timeoutMs) * time.Millisecond)
	go func() { // wakes the wait below at the deadline
		time.Sleep(time.Until(deadline))
		kub.mu.Lock()
		kub.cond.Broadcast()
		kub.mu.Unlock()
	}()
	kub.mu.Lock()
	defer kub.mu.Unlock()
	for len(kub.regs) < n && time.Now().Before(deadline) {
		kub.cond.Wait()
	}
	regs := kub.regs
	kub.regs = nil
	if regs == nil {
		regs = []registration{}
	}
	return map[string]interface{}{"ok": len(regs) >= n, "regs": regs}
}

func closeConns() {
	for id, s := range streams {
		s.cancel()
		delete(streams, id)
	}
	for _, st := range stalled {
		st.cancel()
		st.conn.Close()
	}
	stalled = nil
	releasePending()
	for e, c := range conns {
		c.Close()
		delete(conns, e)
	}
}

func do(c command) map[string]interface{} {
	switch c.Op {
	case "wait_register":
		return waitRegister(c.N, c.TimeoutMs)
	case "restart":
		closeConns()
		if err := kub.restart(); err != nil {
			return map[string]interface{}{"ok": false, "error": err.Error()}
		}
		return map[string]interface{}{"ok": true, "at_ms": time.Now().UnixNano() / 1e6}
	case "stop": // the kubelet goes away: its socket with it
		closeConns()
		if kub.srv != nil {
			kub.srv.Stop()
			kub.srv = nil
		}
		os.Remove(filepath.Join(*dir, "kubelet.sock"))
		return map[string]interface{}{"ok": true}
	case "disconnect":
		closeConns()
		return map[string]interface{}{"ok": true}
	case "next":
		return next(c.Stream, c.TimeoutMs)
	case "stall":
		return stall(c.Endpoint)
	case "stall_result":
		return stallResult(c.Stream, c.TimeoutMs)
	case "stall_read":
		return stallRead(c.Stream, c.TimeoutMs)
	case "pending":
		return pending(c.Endpoint, c.N, c.Refused, c.TimeoutMs)
	case "release":
		releasePending()
		return map[string]interface{}{"ok": true}
	}
	cc, err := conn(c.Endpoint)
	if err != nil {
		return map[string]interface{}{"ok": false, "error": "dial " + c.Endpoint + ": " + err.Error()}
	}
	switch c.Op {
	case "options":
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		o, err := pb.NewDevicePluginClient(cc).GetDevicePluginOptions(ctx, &pb.Empty{})
		if err != nil {
			return fail(err)
		}
		return map[string]interface{}{"ok": true, "preferred": o.GetPreferredAllocationAvailable,
			"prestart": o.PreStartRequired}
	case "watch":
		return watch(cc)
	case "allocate":
		return allocate(cc, c.Containers)
	case "preferred":
		return preferred(cc, c.Requests)
	case "raw":
		return raw(cc, c.Method, c.Data)
	}
	return map[string]interface{}{"ok": false, "error": fmt.Sprintf("unknown op %q", c.Op)}
}

func main() {
	flag.Parse()
	kub.cond = sync.NewCond(&kub.mu)
	if err := kub.serve(); err != nil {
		log.Fatalf("kubelet: %v", err)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		var c command
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			out.Encode(map[string]interface{}{"ok": false, "error": err.Error()})
			continue
		}
		if c.Op == "quit" {
			break
		}
		out.Encode(do(c))
	}
	closeConns()
	if kub.srv != nil {
		kub.srv.Stop()
	}
}
