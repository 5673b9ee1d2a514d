/* SPDX-License-Identifier: Apache-2.0 */
/*
 * register.c - one Registration.Register call (register.h), on a
 * completion queue of its own that only this call uses.
 */
#include "plugin/register.h"
#include "common/kubesock.h"

#include <stdio.h>
#include <string.h>

#include <grpc/grpc.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "deviceplugin_v1beta1.pb-c.h"

#define REGISTER_METHOD "/v1beta1.Registration/Register"

static grpc_byte_buffer *request(const char *endpoint, const char *resource, int preferred)
{
	V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
	V1beta1__DevicePluginOptions opt = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
	grpc_slice sl;
	grpc_byte_buffer *bb;

	opt.get_preferred_allocation_available = preferred;
	req.version = (char *)PREG_API_VERSION;
	req.endpoint = (char *)endpoint;
	req.resource_name = (char *)resource;
	req.options = &opt;
	sl = grpc_slice_malloc(v1beta1__register_request__get_packed_size(&req));
	v1beta1__register_request__pack(&req, GRPC_SLICE_START_PTR(sl));
	bb = grpc_raw_byte_buffer_create(&sl, 1);
	grpc_slice_unref(sl);
	return bb;
}

int preg_register(const char *kubelet_sock, const char *endpoint, const char *resource,
		  int preferred, char *err, size_t errlen)
{
	grpc_completion_queue *cq;
	grpc_channel *ch;
	grpc_call *call;
	grpc_op ops[6];
	grpc_metadata_array md_init, md_trail;
	grpc_byte_buffer *req, *resp = NULL;
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	const char *errstr = NULL;
	gpr_timespec deadline;
	int rc = -1;

	grpc_init();
	cq = grpc_completion_queue_create_for_pluck(NULL);
	ch = kubesock_channel(kubelet_sock, 1 << 20);
	if (!ch) {
		snprintf(err, errlen, "Register on %s: cannot create a channel", kubelet_sock);
		goto out_cq;
	}
	deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
				gpr_time_from_millis(PREG_DEADLINE_MS, GPR_TIMESPAN));
	call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
					grpc_slice_from_static_string(REGISTER_METHOD), NULL, deadline,
					NULL);
	grpc_metadata_array_init(&md_init);
	grpc_metadata_array_init(&md_trail);
	req = request(endpoint, resource, preferred);
	memset(ops, 0, sizeof(ops));
	/* the socket appears at bind(), before the kubelet listens: wait */
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY |
		       GRPC_INITIAL_METADATA_WAIT_FOR_READY_EXPLICITLY_SET;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = req;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &md_init;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &resp;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &md_trail;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;
	ops[5].data.recv_status_on_client.error_string = &errstr;
	if (grpc_call_start_batch(call, ops, 6, ops, NULL) != GRPC_CALL_OK) {
		snprintf(err, errlen, "Register on %s: cannot start the call", kubelet_sock);
	} else {
		/* gRPC ends the call at its deadline, so this returns */
		grpc_completion_queue_pluck(cq, ops, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		if (status == GRPC_STATUS_OK) {
			rc = 0;
		} else {
			char *d = grpc_slice_to_c_string(details);
			snprintf(err, errlen, "Register %s on %s: %s (%d): %s", resource, kubelet_sock,
				 kubesock_status_name((int)status), (int)status,
				 d && d[0] ? d : "no details");
			gpr_free(d);
		}
	}
	grpc_call_unref(call);
	grpc_byte_buffer_destroy(req);
	if (resp)
		grpc_byte_buffer_destroy(resp);
	grpc_slice_unref(details);
	gpr_free((void *)errstr);
	grpc_metadata_array_destroy(&md_init);
	grpc_metadata_array_destroy(&md_trail);
	grpc_channel_destroy(ch);
out_cq:
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
	grpc_shutdown();
	return rc;
}
