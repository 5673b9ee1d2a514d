/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_plugin_unit.c - the device plugin's pure parts (config, device ids,
 * Allocate, GetPreferredAllocation, bus ids, minors, XIDs) and the preempt
 * library installer (common/preemptlib.c, common/sha256.c), without a
 * kubelet or a GPU.
 *
 *   test_plugin_unit                      run the unit tests
 *   test_plugin_unit install SRC DIR VER  install like the node agent does (for test_plugin.py)
 */
#include "tests/check.h"

#ifdef GPUQOS_HAVE_MHD
#include "common/httpd.h"
#endif
#include "common/preemptlib.h"
#include "common/sha256.h"
#include "plugin/config.h"
#include "plugin/devices.h"
#include "plugin/gpus.h"
#include "plugin/health.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define U0 "GPU-00000000-0000-4000-8000-000000000000"
#define U1 "GPU-11111111-1111-4111-8111-111111111111"

static void two_gpus(struct pgpus *g)
{
	memset(g, 0, sizeof(*g));
	strcpy(g->gpu[0].uuid, U0);
	strcpy(g->gpu[1].uuid, U1);
	g->gpu[0].minor = 3;
	g->gpu[1].minor = 7;
	g->gpu[0].numa = 0;
	g->gpu[1].numa = -1;
	g->gpu[0].healthy = 1;
	g->gpu[1].healthy = 0;
	g->n = 2;
}

static int apply(struct plugin_config *c, const char *json)
{
	char err[256];

	pcfg_defaults(c);
	return pcfg_apply_json(c, json, strlen(json), err, sizeof(err));
}

static void test_config(void)
{
	struct plugin_config c;
	char err[256];

	pcfg_defaults(&c);
	CHECK(c.mode == PCFG_SHARES && c.replicas == 4 && c.lc_replicas == 1);
	CHECK(strcmp(c.device_plugin_dir, "/var/lib/kubelet/device-plugins") == 0);
	CHECK(apply(&c, "{\"version\":1,\"mode\":\"inject\",\"injectDevices\":7,"
			"\"visibility\":\"cdi\",\"injection\":\"none\",\"preferredAllocation\":\"pack\"}") ==
	      0);
	CHECK(c.mode == PCFG_INJECT && c.inject_devices == 7 && c.visibility == PCFG_VIS_CDI &&
	      c.injection == PCFG_INJ_NONE && c.preferred == PCFG_PREF_PACK);
	/* a bad value leaves everything as it was */
	{
		const char *bad = "{\"version\":1,\"replicas\":3,\"lcReplicas\":65}";
		CHECK(pcfg_apply_json(&c, bad, strlen(bad), err, sizeof(err)) < 0);
	}
	CHECK(c.replicas == 4 && strstr(err, "lcReplicas"));
	CHECK(apply(&c, "{\"version\":1,\"replicas\":-1}") < 0);
	CHECK(apply(&c, "{\"version\":1,\"replicas\":\"4\"}") < 0);
	CHECK(apply(&c, "[1]") < 0);
	CHECK(apply(&c, "{\"version\":1,\"injectResourceName\":\"a/b/c\"}") < 0);
	CHECK(apply(&c, "{\"version\":1,\"injectResourceName\":\"x.io/ok_name-1\"}") == 0);
	CHECK(apply(&c, "{\"version\":1,\"lcReplicas\":0}") == 0 && c.lc_replicas == 0);
}

static void test_ids(void)
{
	struct plugin_config c;
	struct presource r[2];
	struct pgpus g;
	struct parena a = { 0 };
	V1beta1__ListAndWatchResponse *m;

	two_gpus(&g);
	pcfg_defaults(&c);
	CHECK_EQ_U(pres_from_config(&c, r), 2);
	CHECK(r[0].kind == PRES_BE && r[1].kind == PRES_LC && r[1].per_gpu == 1);
	CHECK(pdev_id_gpu(&r[0], &g, U1 "::3") == 1);
	CHECK(pdev_id_gpu(&r[0], &g, U1 "::4") < 0);
	CHECK(pdev_id_gpu(&r[0], &g, U1 "::03") < 0);
	CHECK(pdev_id_gpu(&r[0], &g, U1 "::") < 0);
	CHECK(pdev_id_gpu(&r[0], &g, U1) < 0);
	CHECK(pdev_id_gpu(&r[0], &g, "GPU-x::0") < 0);
	CHECK(pdev_id_gpu(&r[1], &g, U0 "::0") == 0);
	CHECK(pdev_id_gpu(&r[1], &g, U0 "::1") < 0);
	m = pdev_list(&r[0], &g, &a);
	CHECK(m && m->n_devices == 8);
	if (m && m->n_devices == 8) {
		CHECK(strcmp(m->devices[5]->id, U1 "::1") == 0);
		CHECK(strcmp(m->devices[0]->health, "Healthy") == 0);
		CHECK(strcmp(m->devices[4]->health, "Unhealthy") == 0);
		CHECK(m->devices[0]->topology && m->devices[0]->topology->nodes[0]->id == 0);
		CHECK(!m->devices[4]->topology);
	}
	parena_free(&a);
	c.mode = PCFG_INJECT;
	c.inject_devices = 3;
	CHECK_EQ_U(pres_from_config(&c, r), 1);
	CHECK(pdev_id_gpu(&r[0], &g, "qos-2") == 0 && pdev_id_gpu(&r[0], &g, "qos-3") < 0);
	CHECK(pdev_id_gpu(&r[0], &g, "qos-") < 0 && pdev_id_gpu(&r[0], &g, "qos-1x") < 0);
}

static const char *env_of(const V1beta1__ContainerAllocateResponse *c, const char *k)
{
	for (size_t i = 0; i < c->n_envs; i++)
		if (strcmp(c->envs[i]->key, k) == 0)
			return c->envs[i]->value;
	return NULL;
}

static V1beta1__AllocateResponse *alloc1(const struct plugin_config *c, const struct presource *r,
					 const struct pgpus *g, const struct pinject *inj,
					 char **ids, size_t n, struct parena *a, char *why)
{
	V1beta1__ContainerAllocateRequest q = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
	V1beta1__ContainerAllocateRequest *qs[1] = { &q };
	V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;

	q.devices_ids = ids;
	q.n_devices_ids = n;
	req.container_requests = qs;
	req.n_container_requests = 1;
	return pdev_allocate(c, r, g, inj, &req, a, why, 256);
}

/* One id in two containers of one request: refused, naming the id and
 * both containers; distinct ids in several containers pass. */
static void test_allocate_across(const struct plugin_config *c, const struct presource *r,
				 const struct pgpus *g, const struct pinject *inj)
{
	char *c0[] = { U0 "::0", U1 "::1" }, *c1[] = { U0 "::1" }, *c2[] = { U1 "::1", U0 "::2" };
	V1beta1__ContainerAllocateRequest q[3] = { V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT,
						   V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT,
						   V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT };
	V1beta1__ContainerAllocateRequest *qs[3] = { &q[0], &q[1], &q[2] };
	V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
	struct parena a = { 0 };
	char why[256];

	q[0].devices_ids = c0;
	q[0].n_devices_ids = 2;
	q[1].devices_ids = c1;
	q[1].n_devices_ids = 1;
	q[2].devices_ids = c2;
	q[2].n_devices_ids = 2;
	req.container_requests = qs;
	req.n_container_requests = 2;
	CHECK(pdev_allocate(c, r, g, inj, &req, &a, why, sizeof(why)) != NULL);
	parena_free(&a);
	req.n_container_requests = 3;
	CHECK(!pdev_allocate(c, r, g, inj, &req, &a, why, sizeof(why)) &&
	      strstr(why, "\"" U1 "::1\" given to container requests 0 and 2"));
	parena_free(&a);
}

static void test_allocate(void)
{
	struct plugin_config c;
	struct presource r[2];
	struct pgpus g;
	struct parena a = { 0 };
	struct pinject inj = { "/var/lib/gpuqos/lib/0.1.0-abc", 1 };
	char *ids[] = { U1 "::0", U0 "::2", U1 "::1" };
	char *dup[] = { U0 "::1", U0 "::1" };
	char why[256];
	V1beta1__AllocateResponse *resp;

	two_gpus(&g);
	pcfg_defaults(&c);
	pres_from_config(&c, r);
	resp = alloc1(&c, &r[0], &g, &inj, ids, 3, &a, why);
	CHECK(resp && resp->n_container_responses == 1);
	if (resp) {
		const V1beta1__ContainerAllocateResponse *cr = resp->container_responses[0];
		CHECK(strcmp(env_of(cr, "NVIDIA_VISIBLE_DEVICES"), U1 "," U0) == 0);
		CHECK(strcmp(env_of(cr, "LD_PRELOAD"), PREEMPTLIB_CONTAINER_LIB) == 0);
		CHECK(strcmp(env_of(cr, "GPUQOS_ALLOCATION"), U1 "::0," U0 "::2," U1 "::1") == 0);
		CHECK(cr->n_mounts == 2 && cr->n_devices == 0 && cr->n_cdi_devices == 0);
	}
	parena_free(&a);
	c.visibility = PCFG_VIS_DEVICES;
	c.injection = PCFG_INJ_LD_SO_PRELOAD;
	resp = alloc1(&c, &r[0], &g, &inj, ids, 3, &a, why);
	CHECK(resp);
	if (resp) {
		const V1beta1__ContainerAllocateResponse *cr = resp->container_responses[0];
		CHECK(cr->n_devices == 5 && strcmp(cr->devices[3]->host_path, "/dev/nvidia7") == 0 &&
		      strcmp(cr->devices[4]->host_path, "/dev/nvidia3") == 0);
		CHECK(!env_of(cr, "LD_PRELOAD") && !env_of(cr, "NVIDIA_VISIBLE_DEVICES"));
		CHECK(cr->n_mounts == 3 &&
		      strcmp(cr->mounts[2]->host_path, "/var/lib/gpuqos/lib/0.1.0-abc/ld.so.preload") == 0 &&
		      strcmp(cr->mounts[2]->container_path, "/etc/ld.so.preload") == 0 &&
		      cr->mounts[2]->read_only);
	}
	parena_free(&a);
	CHECK(!alloc1(&c, &r[0], &g, &inj, dup, 2, &a, why) && strstr(why, "twice"));
	parena_free(&a);
	CHECK(!alloc1(&c, &r[1], &g, &inj, &ids[2], 1, &a, why) && strstr(why, "unknown device id"));
	parena_free(&a);
	CHECK(!alloc1(&c, &r[0], &g, &inj, ids, 0, &a, why) && strstr(why, "no device ids"));
	parena_free(&a);
	test_allocate_across(&c, &r[0], &g, &inj);
}

/* One preferred pick; returns the chosen ids joined by ' '. */
static const char *prefer(const struct plugin_config *c, const struct presource *r,
			  const struct pgpus *g, char **avail, size_t na, char **must, size_t nm,
			  int size)
{
	static char out[1024];
	V1beta1__ContainerPreferredAllocationRequest q =
		V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
	V1beta1__ContainerPreferredAllocationRequest *qs[1] = { &q };
	V1beta1__PreferredAllocationRequest req = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
	V1beta1__PreferredAllocationResponse *resp;
	struct parena a = { 0 };
	char why[256];

	q.available_deviceids = avail;
	q.n_available_deviceids = na;
	q.must_include_deviceids = must;
	q.n_must_include_deviceids = nm;
	q.allocation_size = size;
	req.container_requests = qs;
	req.n_container_requests = 1;
	out[0] = '\0';
	resp = pdev_preferred(c, r, g, &req, &a, why, sizeof(why));
	if (!resp)
		snprintf(out, sizeof(out), "error: %s", why);
	for (size_t i = 0; resp && i < resp->container_responses[0]->n_deviceids; i++)
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", i ? " " : "",
			 resp->container_responses[0]->deviceids[i]);
	parena_free(&a);
	return out;
}

static void test_preferred(void)
{
	struct plugin_config c;
	struct presource r[2];
	struct pgpus g;
	char *all[] = { U0 "::0", U0 "::1", U0 "::2", U0 "::3",
			U1 "::0", U1 "::1", U1 "::2", U1 "::3" };
	char *busy0[] = { U0 "::3", U1 "::0", U1 "::1", U1 "::2", U1 "::3" };
	char *lc[] = { U0 "::1", U1 "::0", U1 "::1" };
	char *must[] = { U1 "::2" };

	two_gpus(&g);
	pcfg_defaults(&c);
	pres_from_config(&c, r);
	CHECK(strcmp(prefer(&c, &r[0], &g, all, 8, NULL, 0, 2), U0 "::0 " U1 "::0") == 0);
	CHECK(strcmp(prefer(&c, &r[0], &g, busy0, 5, NULL, 0, 1), U1 "::0") == 0);
	CHECK(strcmp(prefer(&c, &r[0], &g, busy0, 5, must, 1, 2), U1 "::2 " U0 "::3") == 0);
	CHECK(strncmp(prefer(&c, &r[0], &g, busy0, 5, NULL, 0, 6), "error:", 6) == 0);
	CHECK(strncmp(prefer(&c, &r[0], &g, busy0, 2, must, 1, 1), "error:", 6) == 0);
	CHECK(strncmp(prefer(&c, &r[0], &g, busy0, 5, NULL, 0, 0), "error:", 6) == 0);
	c.preferred = PCFG_PREF_PACK;
	CHECK(strcmp(prefer(&c, &r[0], &g, busy0, 5, NULL, 0, 1), U0 "::3") == 0);
	CHECK(strcmp(prefer(&c, &r[0], &g, all, 8, NULL, 0, 3), U0 "::0 " U0 "::1 " U0 "::2") == 0);
	/* LC: GPU 0 hosts LC work (its ::0 is taken): pack or spread, GPU 1 first */
	c.lc_replicas = 2;
	pres_from_config(&c, r);
	CHECK(strcmp(prefer(&c, &r[1], &g, lc, 3, NULL, 0, 1), U1 "::0") == 0);
	c.preferred = PCFG_PREF_SPREAD;
	CHECK(strcmp(prefer(&c, &r[1], &g, lc, 3, NULL, 0, 1), U1 "::0") == 0);
}

static void test_host_parsing(void)
{
	char b[32];

	CHECK(pgpus_sysfs_bus_id("00000000:3b:00.0", b, sizeof(b)) == 0 &&
	      strcmp(b, "0000:3b:00.0") == 0);
	CHECK(pgpus_sysfs_bus_id("0000:3B:1f.0", b, sizeof(b)) == 0 && strcmp(b, "0000:3b:1f.0") == 0);
	CHECK(pgpus_sysfs_bus_id("00000000:3b:00.0/../x", b, sizeof(b)) < 0);
	CHECK(pgpus_sysfs_bus_id("junk", b, sizeof(b)) < 0);
	CHECK(pgpus_parse_minor("Model:  H200\nDevice Minor: \t 6\nBus Type: PCIe\n") == 6);
	CHECK(pgpus_parse_minor("Model: x\n") < 0);
	CHECK(pgpus_parse_minor("Device Minor: -1\n") < 0);
	for (unsigned x = 0; x < 200; x++)
		CHECK(phealth_xid_ignored(x) ==
		      (x == 13 || x == 31 || x == 43 || x == 45 || x == 68 || x == 109));
}

static void hex(const uint8_t *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static void test_sha256(void)
{
	uint8_t d[32];
	char h[65];
	char *big = malloc(1000000);

	sha256_digest("", 0, d);
	hex(d, 32, h);
	CHECK(strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);
	sha256_digest("abc", 3, d);
	hex(d, 32, h);
	CHECK(strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
	sha256_digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, d);
	hex(d, 32, h);
	CHECK(strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0);
	memset(big, 'a', 1000000);
	sha256_digest(big, 1000000, d);
	hex(d, 32, h);
	CHECK(strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0);
	free(big);
}

static void write_text(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");

	CHECK(f != NULL);
	if (f) {
		fputs(s, f);
		fclose(f);
	}
}

static void test_install(void)
{
	char tmp[] = "/tmp/gpuqos-preemptlib-XXXXXX", src[PATH_MAX], dir[PATH_MAX + 8];
	char n1[128], n2[128], n3[128], res[PATH_MAX], p[PATH_MAX * 2], err[512];
	struct stat st1, st2;
	int pre = 0;

	CHECK(mkdtemp(tmp) != NULL);
	snprintf(src, sizeof(src), "%s/src.so", tmp);
	snprintf(dir, sizeof(dir), "%s/lib", tmp);
	CHECK(preemptlib_resolve(dir, res, sizeof(res), &pre) < 0); /* nothing installed */
	write_text(src, "version one");
	CHECK(preemptlib_install(src, dir, "0.1.0", n1, sizeof(n1), err, sizeof(err)) == 0);
	CHECK(strcmp(n1, "0.1.0-") > 0 && strlen(n1) == strlen("0.1.0-") + 12);
	CHECK(preemptlib_resolve(dir, res, sizeof(res), &pre) == 0 && pre);
	snprintf(p, sizeof(p), "%s/%s", dir, n1);
	CHECK(strcmp(res, p) == 0);
	snprintf(p, sizeof(p), "%s/%s/" PREEMPTLIB_LIB_NAME, dir, n1);
	CHECK(stat(p, &st1) == 0 && (st1.st_mode & 0777) == 0755);
	/* the same content again: the same directory, the same file */
	CHECK(preemptlib_install(src, dir, "0.1.0", n2, sizeof(n2), err, sizeof(err)) == 0);
	CHECK(strcmp(n1, n2) == 0 && stat(p, &st2) == 0 && st1.st_ino == st2.st_ino);
	/* new content: a new directory; the old file stays untouched */
	write_text(src, "version two");
	CHECK(preemptlib_install(src, dir, "0.1.0", n3, sizeof(n3), err, sizeof(err)) == 0);
	CHECK(strcmp(n1, n3) != 0 && stat(p, &st2) == 0 && st1.st_ino == st2.st_ino &&
	      st2.st_size == (off_t)strlen("version one"));
	CHECK(preemptlib_resolve(dir, res, sizeof(res), &pre) == 0 && strstr(res, n3));
	/* a failure (missing source) leaves `current` where it was */
	CHECK(preemptlib_install("/nonexistent/lib.so", dir, "0.1.0", NULL, 0, err, sizeof(err)) < 0 &&
	      strstr(err, "/nonexistent/lib.so"));
	CHECK(preemptlib_install(src, dir, "../x", NULL, 0, err, sizeof(err)) < 0);
	CHECK(preemptlib_resolve(dir, res, sizeof(res), &pre) == 0 && strstr(res, n3));
	/* `current` pointing out of the directory is not followed */
	snprintf(p, sizeof(p), "%s/current", dir);
	unlink(p);
	CHECK(symlink("../evil", p) == 0);
	CHECK(preemptlib_resolve(dir, res, sizeof(res), &pre) < 0);
	snprintf(p, sizeof(p), "rm -rf '%s'", tmp);
	CHECK(system(p) == 0);
}

#ifdef GPUQOS_HAVE_MHD
/* The metrics address grammar both daemons share (common/httpd.c). */
static void test_http_address(void)
{
	static const struct {
		const char *in, *host;
		unsigned port;
	} good[] = { { ":9402", "", 9402 }, { "127.0.0.1:0", "127.0.0.1", 0 },
		     { "[::1]:9403", "::1", 9403 }, { "node.local:65535", "node.local", 65535 } };
	static const char *const bad[] = { "9402", "host:", ":65536", ":12x", "", "::1:-1",
					   ":99999999999999999999" };
	char host[16];
	unsigned port;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		CHECK(httpd_split_address(good[i].in, host, sizeof(host), &port) == 0);
		CHECK(strcmp(host, good[i].host) == 0);
		CHECK_EQ_U(port, good[i].port);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(httpd_split_address(bad[i], host, sizeof(host), &port) == -1);
	/* A host that does not fit is refused, not cut. */
	CHECK(httpd_split_address("a-very-long-host-name:80", host, sizeof(host), &port) == -1);
	CHECK(httpd_address_off("") && httpd_address_off("off") && !httpd_address_off(":0"));
}
#endif

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "install") == 0) {
		char name[128], err[512];
		if (preemptlib_install(argv[2], argv[3], argv[4], name, sizeof(name), err,
				       sizeof(err)) < 0) {
			fprintf(stderr, "install: %s\n", err);
			return 1;
		}
		printf("%s\n", name);
		return 0;
	}
	test_config();
	test_ids();
	test_allocate();
	test_preferred();
	test_host_parsing();
	test_sha256();
	test_install();
#ifdef GPUQOS_HAVE_MHD
	test_http_address();
#endif
	CHECK_DONE();
}
