/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_cuda.c - libcuda's own functions, as the library finds them:
 * libc's real dlsym (the library exports a dlsym of its own,
 * preempt_launch.c), libcuda's definition of a name, and telling the
 * library's own functions from libcuda's.
 *
 * Owns: those lookups. Does not own: the interposed dlsym and the
 * wrappers (preempt_launch.c), or what the wake thread calls
 * (preempt_wake.c); both call down into this file.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>

#include "preempt_cuda.h"
#include "preempt_libc.h"

/* glibc only: NULL under another C library, which must still load this. */
extern void *dlvsym(void *, const char *, const char *) __attribute__((weak));

static _Atomic(pa_dlsym_fn) pa_dlsym_real;

pa_dlsym_fn pa_real_dlsym(void)
{
	/* dlsym's versions: GLIBC_2.34 where libc has it, the architecture's
	 * first version in libdl before. dlvsym is not interposed. Without
	 * dlvsym (not glibc), the next object's own dlsym. */
	static const char *const versions[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17",
						"GLIBC_2.0" };
	pa_dlsym_fn f = atomic_load_explicit(&pa_dlsym_real, memory_order_acquire);

	for (size_t i = 0; !f && dlvsym && i < sizeof(versions) / sizeof(versions[0]); i++)
		f = (pa_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
	if (!f && !dlvsym)
		f = (pa_dlsym_fn)pa_elf_other_sym("dlsym");
	if (f)
		atomic_store_explicit(&pa_dlsym_real, f, memory_order_release);
	return f;
}

int pa_is_ours(void *p)
{
	Dl_info self, it;

	if (!dladdr((void *)pa_is_ours, &self) || !dladdr(p, &it))
		return 0;
	return self.dli_fbase == it.dli_fbase;
}

int pa_launch_counting(void)
{
	return PA_DLSYM_INTERPOSED;
}

/* For the functions this library exports too and for those the wake
 * thread calls: the next one after this library, else libcuda's own where
 * it was loaded without RTLD_GLOBAL (libcuda's references to its own
 * exported functions can land here, and so can what cuGetProcAddress
 * hands out). NULL: none is loaded. */
void *pa_cuda_sym(const char *name)
{
	pa_dlsym_fn real = pa_real_dlsym();
	void *p, *h;

	if (!real)
		return NULL;
	p = real(RTLD_NEXT, name);
	if (p)
		return p;
	h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return NULL;
	p = real(h, name);
	dlclose(h);
	return pa_is_ours(p) ? NULL : p;
}
