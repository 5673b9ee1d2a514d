/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Compiled with clang -target bpf by the tests: the RM ABI header and its
 * decoders must build for the kernel side. */
#include "abi/rm_abi.h"

int decode(unsigned long request, const struct rm_xfer *x);
int decode(unsigned long request, const struct rm_xfer *x)
{
	enum rm_call_kind k = rm_call_kind_of(request);

	if (k == RM_CALL_XFER)
		k = rm_xfer_kind(x);
	return rm_status_offset(k) + (int)rm_params_size(k) + rm_engine_is_gr(1) +
	       rm_class_is_channel(RM_CLASS_HOPPER_GPFIFO);
}
