/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_libc.c - the C library under the preempt library.
 *
 * The library is built on glibc and injected into every container,
 * whatever it was built on. On glibc it takes part; on any other C
 * library (a musl program, say) it must load and change nothing. Loading
 * works because every symbol it needs at load time exists in musl too, and
 * the glibc-only ones (gnu_get_libc_version, dlvsym, __register_atfork)
 * are weak references that are simply NULL there. What remains is dlsym:
 * the library exports one of its own (preempt_launch.c), so the real one
 * cannot be asked for by name. Without dlvsym it is found here, in the
 * dynamic symbol table of the first other object that defines it.
 *
 * Owns: the libc test and that lookup. Does not own: what the library
 * does with either (preempt_ioctl.c, preempt_cuda.c).
 */
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "preempt_libc.h"

extern const char *gnu_get_libc_version(void) __attribute__((weak));

int pa_libc_is_glibc(void)
{
	return gnu_get_libc_version != NULL;
}

/* A dynamic entry's address: relocated in place by glibc, not by musl. */
static uintptr_t pa_dyn_addr(const struct dl_phdr_info *info, ElfW(Addr) v)
{
	return v < info->dlpi_addr ? info->dlpi_addr + v : v;
}

static uint32_t pa_gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

/* The index of name in a DT_GNU_HASH table, or 0. */
static uint32_t pa_gnu_lookup(const uint32_t *t, const ElfW(Sym) *syms, const char *strs,
			      const char *name)
{
	uint32_t nbuckets = t[0], symoffset = t[1], bloom_size = t[2];
	const ElfW(Addr) *bloom = (const ElfW(Addr) *)(const void *)(t + 4);
	const uint32_t *buckets = (const uint32_t *)(const void *)(bloom + bloom_size);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t h = pa_gnu_hash(name), i;

	if (nbuckets == 0)
		return 0;
	i = buckets[h % nbuckets];
	if (i < symoffset)
		return 0;
	for (;; i++) {
		uint32_t ch = chain[i - symoffset];

		if ((ch | 1) == (h | 1) && strcmp(strs + syms[i].st_name, name) == 0)
			return i;
		if (ch & 1)
			return 0;
	}
}

/* The index of name in a DT_HASH table, or 0. */
static uint32_t pa_sysv_lookup(const uint32_t *t, const ElfW(Sym) *syms, const char *strs,
			       const char *name)
{
	uint32_t nbuckets = t[0], nchain = t[1], h = 0, g;
	const uint32_t *buckets = t + 2, *chain = buckets + nbuckets;

	for (const unsigned char *s = (const unsigned char *)name; *s; s++) {
		h = (h << 4) + *s;
		g = h & 0xf0000000u;
		if (g)
			h ^= g >> 24;
		h &= ~g;
	}
	if (nbuckets == 0)
		return 0;
	for (uint32_t i = buckets[h % nbuckets], n = 0; i != 0 && i < nchain && n < nchain;
	     i = chain[i], n++)
		if (strcmp(strs + syms[i].st_name, name) == 0)
			return i;
	return 0;
}

struct pa_find {
	const char *name;
	uintptr_t self; /* this library's load address */
	void *found;
};

static int pa_find_in(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct pa_find *f = arg;
	const ElfW(Dyn) *dyn = NULL;
	const ElfW(Sym) *syms = NULL;
	const uint32_t *gnu = NULL, *sysv = NULL;
	const char *strs = NULL;
	uint32_t i;

	(void)size;
	if (info->dlpi_addr == f->self)
		return 0;
	for (int p = 0; p < info->dlpi_phnum; p++)
		if (info->dlpi_phdr[p].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[p].p_vaddr);
	if (dyn == NULL)
		return 0;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		if (dyn->d_tag == DT_SYMTAB)
			syms = (const ElfW(Sym) *)pa_dyn_addr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_STRTAB)
			strs = (const char *)pa_dyn_addr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_GNU_HASH)
			gnu = (const uint32_t *)pa_dyn_addr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_HASH)
			sysv = (const uint32_t *)pa_dyn_addr(info, dyn->d_un.d_ptr);
	}
	if (syms == NULL || strs == NULL)
		return 0;
	i = gnu ? pa_gnu_lookup(gnu, syms, strs, f->name)
		: sysv ? pa_sysv_lookup(sysv, syms, strs, f->name) : 0;
	if (i == 0 || syms[i].st_shndx == SHN_UNDEF || ELF64_ST_TYPE(syms[i].st_info) != STT_FUNC)
		return 0;
	f->found = (void *)(info->dlpi_addr + syms[i].st_value);
	return 1;
}

/* This library's load address: the object that holds this function. */
static int pa_find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t *self = arg, here = (uintptr_t)pa_find_self;

	(void)size;
	for (int p = 0; p < info->dlpi_phnum; p++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[p];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && here >= lo && here - lo < ph->p_memsz) {
			*self = info->dlpi_addr;
			return 1;
		}
	}
	return 0;
}

void *pa_elf_other_sym(const char *name)
{
	struct pa_find f = { .name = name };

	if (dl_iterate_phdr(pa_find_self, &f.self) == 0)
		return NULL;
	dl_iterate_phdr(pa_find_in, &f);
	return f.found;
}
