/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cgroup.c - process -> pod mapping (agent/kubenode/cgroup.c):
 * every fixture shape in tests/fixtures/cgroup maps to the pod and container
 * its .json says; truncated and mutated input is refused without a crash
 * or an out-of-bounds read (run sanitized: every input is an exact-size
 * heap copy); the cgroup v2 id of a real cgroup on this machine matches
 * the kernel's own file handle for it.
 *
 * Usage: test_cgroup <fixture dir>
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cgroup.h"
#include "tests/check.h"

#define MIN_FIXTURES 30

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		} else if (buf) {
			buf[n] = '\0';
			*len = (size_t)n;
		}
	}
	fclose(f);
	return buf;
}

/* Parses an exact-size heap copy so ASan sees any read past len. */
static enum cgroup_kind parse_exact(const char *text, size_t len, struct cgroup_info *ci)
{
	char *copy = malloc(len ? len : 1);
	enum cgroup_kind k;

	if (!copy) {
		perror("malloc");
		exit(2);
	}
	memcpy(copy, text, len);
	k = cgroup_parse(copy, len, ci);
	free(copy);
	return k;
}

static void expect_str(const char *name, const cJSON *exp, const char *key, const char *got)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(exp, key);

	if (!v)
		return;
	if (!cJSON_IsString(v) || strcmp(v->valuestring, got) != 0) {
		fprintf(stderr, "%s: %s: want \"%s\", got \"%s\"\n", name, key,
			cJSON_IsString(v) ? v->valuestring : "?", got);
		check_failures++;
	}
}

static void check_fixture(const char *dir, const char *name)
{
	char path[1024];
	size_t tlen = 0, jlen = 0;
	char *text, *json;
	cJSON *exp;
	struct cgroup_info ci;

	snprintf(path, sizeof(path), "%s/%s.cgroup", dir, name);
	text = slurp(path, &tlen);
	snprintf(path, sizeof(path), "%s/%s.json", dir, name);
	json = slurp(path, &jlen);
	CHECK(text && json);
	exp = json ? cJSON_Parse(json) : NULL;
	CHECK(exp);
	if (text && exp) {
		parse_exact(text, tlen, &ci);
		expect_str(name, exp, "kind", cgroup_kind_name(ci.kind));
		expect_str(name, exp, "pod_uid", ci.pod_uid);
		expect_str(name, exp, "container_id", ci.container_id);
		if (ci.kind >= CGROUP_POD_ONLY) {
			expect_str(name, exp, "runtime", cgroup_runtime_name(ci.runtime));
			expect_str(name, exp, "qos", cgroup_qos_name(ci.qos));
		}
		if (ci.kind != CGROUP_MALFORMED)
			expect_str(name, exp, "mode", cgroup_mode_name(ci.mode));
		else
			CHECK(ci.why && ci.why[0]);
		expect_str(name, exp, "unified_path", ci.unified_path);
		/* the v2 id keys a cache only when the v2 line named the pod */
		CHECK(cgroup_v2_keyable(&ci) == (ci.kind >= CGROUP_POD_ONLY && ci.from_version == 2));
		if (strcmp(name, "hybrid_cgroupfs_unified_root") == 0)
			CHECK(!cgroup_v2_keyable(&ci));
		if (strcmp(name, "hybrid_systemd_containerd") == 0)
			CHECK(cgroup_v2_keyable(&ci));
		const cJSON *fv = cJSON_GetObjectItemCaseSensitive(exp, "from_version");
		if (fv && (!cJSON_IsNumber(fv) || fv->valueint != ci.from_version)) {
			fprintf(stderr, "%s: from_version: got %d\n", name, ci.from_version);
			check_failures++;
		}
	}
	cJSON_Delete(exp);
	free(text);
	free(json);
}

/* Whatever the input, the result is one of the kinds and a container
 * result carries a well-formed UID and id. */
static void check_sane(const struct cgroup_info *ci, enum cgroup_kind k)
{
	CHECK(k == ci->kind);
	CHECK(k >= CGROUP_MALFORMED && k <= CGROUP_CONTAINER);
	if (k == CGROUP_CONTAINER) {
		CHECK(strlen(ci->container_id) == CGROUP_CID_LEN);
		CHECK(strlen(ci->pod_uid) == 36 || strlen(ci->pod_uid) == 32);
	}
	if (k == CGROUP_MALFORMED || k == CGROUP_NOT_POD)
		CHECK(ci->pod_uid[0] == '\0');
}

static uint32_t rnd_state = 12345;
static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

static void fuzz_fixture(const char *dir, const char *name)
{
	static const char pick[] = { ':', '/', '\n', '\0', '-', '_', '.', 'a', '0', ' ' };
	char path[1024];
	size_t len = 0, i;
	char *text;
	struct cgroup_info ci;

	snprintf(path, sizeof(path), "%s/%s.cgroup", dir, name);
	text = slurp(path, &len);
	if (!text)
		return;
	for (i = 0; i <= len; i++) /* every truncation */
		check_sane(&ci, parse_exact(text, i, &ci));
	for (i = 0; i < 300 && len; i++) { /* a few byte mutations */
		char *m = malloc(len);
		int j, edits = 1 + (int)(rnd() % 4);
		if (!m)
			exit(2);
		memcpy(m, text, len);
		for (j = 0; j < edits; j++)
			m[rnd() % len] = (rnd() & 1) ? pick[rnd() % sizeof(pick)] : (char)rnd();
		check_sane(&ci, parse_exact(m, len, &ci));
		free(m);
	}
	free(text);
}

static int run_fixtures(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d) {
		fprintf(stderr, "%s: %s\n", dir, strerror(errno));
		return 0;
	}
	while ((e = readdir(d)) != NULL) {
		size_t l = strlen(e->d_name);
		char name[256];
		if (l <= 7 || l >= sizeof(name) || strcmp(e->d_name + l - 7, ".cgroup") != 0)
			continue;
		memcpy(name, e->d_name, l - 7);
		name[l - 7] = '\0';
		check_fixture(dir, name);
		fuzz_fixture(dir, name);
		n++;
	}
	closedir(d);
	return n;
}

/* Spellings the fixtures do not cover: case folding and odd inputs. */
static void test_inline(void)
{
	static const char upper[] = "0::/kubepods/pod5F3C2A1E-8B4D-4E2F-9A6B-1C2D3E4F5A6B/"
				    "3e1f9a7c2b4d6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a7b\n";
	static const char upper_cid[] = "0::/kubepods/pod5f3c2a1e-8b4d-4e2f-9a6b-1c2d3e4f5a6b/"
					"3E1F9A7C2B4D6E8F0A1B2C3D4E5F60718293A4B5C6D7E8F90A1B2C3D4E5F6A7B\n";
	struct cgroup_info ci;

	CHECK(parse_exact(upper, strlen(upper), &ci) == CGROUP_CONTAINER);
	CHECK(strcmp(ci.pod_uid, "5f3c2a1e-8b4d-4e2f-9a6b-1c2d3e4f5a6b") == 0);
	/* not an id any runtime writes: in the pod, container unknown */
	CHECK(parse_exact(upper_cid, strlen(upper_cid), &ci) == CGROUP_POD_ONLY);
	CHECK(cgroup_parse(NULL, 0, &ci) == CGROUP_MALFORMED);
	CHECK(parse_exact("99999999999:cpu:/\n", 18, &ci) == CGROUP_MALFORMED);
	CHECK(parse_exact("1::/\n", 5, &ci) == CGROUP_MALFORMED);
	CHECK(parse_exact("0:cpu:/\n", 8, &ci) == CGROUP_MALFORMED);
}

static void test_read(void)
{
	struct cgroup_info ci;
	char big[] = "/tmp/gpuqos-cgroup-big-XXXXXX";
	int fd;

	CHECK(cgroup_read_pid(getpid(), &ci) >= CGROUP_NOT_POD);
	errno = 0;
	CHECK(cgroup_read_pid(0x3ffffff0, &ci) == -1 && errno == ESRCH);
	CHECK(ci.why && strstr(ci.why, "gone"));
	CHECK(cgroup_read_pid(-1, &ci) == -1 && errno == EINVAL);
	fd = mkstemp(big);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	for (int i = 0; i < CGROUP_TEXT_MAX / 4 + 2; i++)
		CHECK(write(fd, "0::/", 4) == 4);
	close(fd);
	errno = 0;
	CHECK(cgroup_read_file(big, &ci) == -1 && errno == EFBIG);
	unlink(big);
}

/* The kernfs file handle of a cgroup v2 directory is its 64-bit id: an
 * independent reading of what bpf_get_current_cgroup_id() returns. */
static int handle_id(const char *dir, uint64_t *id)
{
	struct {
		struct file_handle fh;
		unsigned char b[64];
	} h;
	int mnt;

	h.fh.handle_bytes = sizeof(h.b);
	if (name_to_handle_at(AT_FDCWD, dir, &h.fh, &mnt, 0) < 0 || h.fh.handle_bytes != 8)
		return -1;
	memcpy(id, h.fh.f_handle, 8);
	return 0;
}

static int write_pid(const char *root, const char *cg)
{
	char p[1200], s[32];
	int fd, n, ok;

	snprintf(p, sizeof(p), "%s%s/cgroup.procs", root, strcmp(cg, "/") ? cg : "");
	fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = snprintf(s, sizeof(s), "%d\n", (int)getpid());
	ok = write(fd, s, (size_t)n) == n;
	close(fd);
	return ok ? 0 : -1;
}

/* Moves this process into a fresh v2 cgroup, reads its own
 * /proc/self/cgroup and checks path -> id against the kernel's handle. */
static void test_inode_moved(const char *root, const char *home)
{
	char dir[1200], name[64];
	struct cgroup_info ci;
	uint64_t id = 0, hid = 0;

	snprintf(name, sizeof(name), "/gpuqos-kubenode-test-%d", (int)getpid());
	snprintf(dir, sizeof(dir), "%s%s", root, name);
	if (mkdir(dir, 0755) < 0) {
		printf("skip: cannot create a v2 cgroup (%s): %s\n", dir, strerror(errno));
		return;
	}
	if (write_pid(root, name) < 0) {
		printf("skip: cannot move into %s: %s\n", dir, strerror(errno));
	} else {
		CHECK(cgroup_read_pid(getpid(), &ci) >= CGROUP_NOT_POD);
		CHECK(strcmp(ci.unified_path, name) == 0);
		CHECK(cgroup_inode_of_path(root, ci.unified_path, &id) == 0);
		CHECK(handle_id(dir, &hid) == 0);
		CHECK_EQ_U(id, hid);
		printf("cgroup %s: id %llu\n", name, (unsigned long long)id);
		CHECK(write_pid(root, home) == 0);
	}
	CHECK(rmdir(dir) == 0);
}

static void test_inode(void)
{
	char root[256], home[CGROUP_PATH_MAX];
	struct cgroup_info ci;
	uint64_t id = 0, hid = 0;

	if (cgroup_v2_root(root, sizeof(root)) < 0) {
		printf("skip: no cgroup v2 mount on this machine\n");
		return;
	}
	printf("cgroup v2 mount: %s\n", root);
	CHECK(cgroup_read_pid(getpid(), &ci) >= CGROUP_NOT_POD);
	CHECK(ci.unified_path[0] == '/');
	snprintf(home, sizeof(home), "%s", ci.unified_path);
	CHECK(cgroup_inode_of_path(root, home, &id) == 0);
	CHECK(handle_id(root, &hid) == 0 || strcmp(home, "/") != 0);
	if (strcmp(home, "/") == 0)
		CHECK_EQ_U(id, hid);
	errno = 0;
	CHECK(cgroup_inode_of_path(root, "/../etc", &id) == -1 && errno == EINVAL);
	CHECK(cgroup_inode_of_path(root, "relative", &id) == -1 && errno == EINVAL);
	CHECK(cgroup_inode_of_path(root, "/a/./b", &id) == -1 && errno == EINVAL);
	CHECK(cgroup_inode_of_path(root, "/no-such-cgroup-gpuqos", &id) == -1 && errno == ENOENT);
	CHECK(cgroup_inode_of_path(root, "/cgroup.procs", &id) == -1 && errno == ENOTDIR);
	CHECK(cgroup_inode_of_path("/tmp", "/", &id) == -1 && errno == EXDEV);
	test_inode_moved(root, home);
}

int main(int argc, char **argv)
{
	int n;

	if (argc != 2) {
		fprintf(stderr, "usage: %s <fixture dir>\n", argv[0]);
		return 2;
	}
	n = run_fixtures(argv[1]);
	printf("%d fixtures\n", n);
	CHECK(n >= MIN_FIXTURES);
	test_inline();
	test_read();
	test_inode();
	CHECK_DONE();
}
