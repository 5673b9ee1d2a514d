/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_kube_config.c - unit tests of agent/kube/kube_config.c: server URL
 * formatting (IPv6), in-cluster configuration, the kubeconfig token,
 * tokenFile and client-certificate forms (a real certificate made by
 * openssl), and the token re-read schedule. No server needed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/kube/kube_config.h"
#include "tests/check.h"

static char dir[64];

static void put(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		CHECK(fputs(text, f) >= 0);
		CHECK(fclose(f) == 0);
	}
}

static char *slurp(const char *name)
{
	char path[256], *buf = calloc(1, 65536);
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (f && buf) {
		size_t n = fread(buf, 1, 65535, f);

		buf[n] = '\0';
	}
	if (f)
		fclose(f);
	return buf;
}

static void test_format(void)
{
	char b[128];

	CHECK(kube_format_server(b, sizeof(b), "https", "10.96.0.1", "443") == 0);
	CHECK(strcmp(b, "https://10.96.0.1:443") == 0);
	CHECK(kube_format_server(b, sizeof(b), "https", "fd00:10:96::1", "443") == 0);
	CHECK(strcmp(b, "https://[fd00:10:96::1]:443") == 0);
	CHECK(kube_format_server(b, sizeof(b), "https", "[::1]", "6443") == 0);
	CHECK(strcmp(b, "https://[::1]:6443") == 0);
	CHECK(kube_format_server(b, sizeof(b), "https", "kubernetes.default.svc", "443") == 0);
	CHECK(strcmp(b, "https://kubernetes.default.svc:443") == 0);
	CHECK(kube_format_server(b, 8, "https", "10.96.0.1", "443") == -1);
}

static void test_in_cluster(void)
{
	struct kube_config cfg;
	char err[512];

	put("token", "sa-token\n");
	put("ca.crt", "not checked here\n");
	put("namespace", "gpuqos-system");
	unsetenv("KUBERNETES_SERVICE_HOST");
	CHECK(kube_config_in_cluster(&cfg, dir, err, sizeof(err)) == -1);
	CHECK(strstr(err, "KUBERNETES_SERVICE_HOST") != NULL);
	setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	CHECK(kube_config_in_cluster(&cfg, dir, err, sizeof(err)) == 0);
	CHECK(strcmp(cfg.server, "https://[fd00:10:96::1]:443") == 0);
	CHECK(strcmp(cfg.token, "sa-token") == 0);
	CHECK(strcmp(cfg.namespace, "gpuqos-system") == 0);
	CHECK(cfg.ca_file && strstr(cfg.ca_file, "/ca.crt") != NULL);
	kube_config_free(&cfg);
	CHECK(kube_config_in_cluster(&cfg, "/nonexistent-sa", err, sizeof(err)) == -1);
	CHECK(strstr(err, "/nonexistent-sa/token") && strstr(err, "No such file"));
}

static void test_token_reread(void)
{
	struct kube_config cfg;
	char err[512];
	uint64_t t0;

	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	put("token", "A");
	CHECK(kube_config_in_cluster(&cfg, dir, err, sizeof(err)) == 0);
	t0 = cfg.token_read_ms;
	put("token", "B\n");
	CHECK(strcmp(kube_config_token(&cfg, t0 + 59999), "A") == 0);
	CHECK(strcmp(kube_config_token(&cfg, t0 + 60000), "B") == 0);
	put("token", "C");
	CHECK(strcmp(kube_config_token(&cfg, t0 + 60001), "B") == 0);
	kube_config_token_rejected(&cfg); /* a 401 */
	CHECK(strcmp(kube_config_token(&cfg, t0 + 60002), "C") == 0);
	/* A vanished file keeps the last good token. */
	snprintf(err, sizeof(err), "%s/token", dir);
	CHECK(unlink(err) == 0);
	kube_config_token_rejected(&cfg);
	CHECK(strcmp(kube_config_token(&cfg, t0 + 60003), "C") == 0);
	kube_config_free(&cfg);
}

static void test_kubeconfig_token(void)
{
	struct kube_config cfg;
	char err[512];

	put("ca.pem", "CA\n");
	put("kc-token",
	    "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"
	    "clusters:\n"
	    "- name: lab\n  cluster:\n    server: https://lab:6443\n    insecure-skip-tls-verify: true\n"
	    "- name: prod\n  cluster:\n    server: https://[2001:db8::1]:6443/\n"
	    "    certificate-authority: ca.pem\n"
	    "contexts:\n"
	    "- name: lab\n  context: {cluster: lab, user: lab-user}\n"
	    "- name: prod\n  context:\n    cluster: prod\n    user: agent\n    namespace: gpuqos\n"
	    "users:\n"
	    "- name: agent\n  user:\n    token: \"static-token\"\n"
	    "- name: lab-user\n  user:\n    tokenFile: tok\n");
	put("tok", "file-token\n");
	CHECK(kube_config_kubeconfig(&cfg, "/nonexistent/kc", NULL, err, sizeof(err)) == -1);
	char path[256];

	snprintf(path, sizeof(path), "%s/kc-token", dir);
	CHECK(kube_config_kubeconfig(&cfg, path, NULL, err, sizeof(err)) == 0);
	CHECK(strcmp(cfg.server, "https://[2001:db8::1]:6443") == 0);
	CHECK(strcmp(cfg.token, "static-token") == 0 && cfg.token_file == NULL);
	CHECK(strcmp(cfg.namespace, "gpuqos") == 0);
	CHECK(cfg.ca_file && strcmp(cfg.ca_file + strlen(dir), "/ca.pem") == 0);
	CHECK(!cfg.insecure);
	kube_config_free(&cfg);
	CHECK(kube_config_kubeconfig(&cfg, path, "lab", err, sizeof(err)) == 0);
	CHECK(strcmp(cfg.server, "https://lab:6443") == 0 && cfg.insecure);
	CHECK(strcmp(cfg.token, "file-token") == 0 && cfg.token_file);
	kube_config_free(&cfg);
	CHECK(kube_config_kubeconfig(&cfg, path, "missing", err, sizeof(err)) == -1);
	CHECK(strstr(err, "\"missing\"") != NULL);
}

/* JSON kubeconfig with the client-certificate-data form, from openssl. */
static void test_kubeconfig_cert(void)
{
	struct kube_config cfg;
	char cmd[1024], err[512], path[256], *cert, *key, *text;

	snprintf(cmd, sizeof(cmd),
		 "cd %s && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=node-a "
		 "-keyout key.pem -out cert.pem >/dev/null 2>&1 && "
		 "openssl base64 -A -in cert.pem > cert.b64 && openssl base64 -A -in key.pem > key.b64",
		 dir);
	if (system(cmd) != 0) {
		printf("SKIP part: openssl could not make a certificate\n");
		return;
	}
	cert = slurp("cert.b64");
	key = slurp("key.b64");
	text = malloc(200000);
	snprintf(text, 200000,
		 "{\"apiVersion\":\"v1\",\"kind\":\"Config\",\"current-context\":\"c\","
		 "\"clusters\":[{\"name\":\"k\",\"cluster\":{\"server\":\"https://10.0.0.1:6443\","
		 "\"certificate-authority-data\":\"%s\"}}],"
		 "\"contexts\":[{\"name\":\"c\",\"context\":{\"cluster\":\"k\",\"user\":\"u\"}}],"
		 "\"users\":[{\"name\":\"u\",\"user\":{\"client-certificate-data\":\"%s\","
		 "\"client-key-data\":\"%s\"}}]}\n", cert, cert, key);
	put("kc-cert.json", text);
	snprintf(path, sizeof(path), "%s/kc-cert.json", dir);
	CHECK(kube_config_kubeconfig(&cfg, path, NULL, err, sizeof(err)) == 0);
	CHECK(cfg.cert_data.len > 100 &&
	      memcmp(cfg.cert_data.data, "-----BEGIN CERTIFICATE-----", 27) == 0);
	CHECK(cfg.key_data.len > 100 && memcmp(cfg.key_data.data, "-----BEGIN", 10) == 0);
	CHECK(cfg.ca_data.len == cfg.cert_data.len);
	CHECK(cfg.token == NULL);
	kube_config_free(&cfg);
	/* The file form, and the forms gpuqos refuses by name. */
	put("kc-files",
	    "current-context: c\nclusters:\n- name: k\n  cluster: {server: 'https://h:1'}\n"
	    "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
	    "users:\n- name: u\n  user:\n    client-certificate: cert.pem\n"
	    "    client-key: /abs/key.pem\n");
	snprintf(path, sizeof(path), "%s/kc-files", dir);
	CHECK(kube_config_kubeconfig(&cfg, path, NULL, err, sizeof(err)) == 0);
	CHECK(cfg.cert_file && strcmp(cfg.cert_file + strlen(dir), "/cert.pem") == 0);
	CHECK(cfg.key_file && strcmp(cfg.key_file, "/abs/key.pem") == 0);
	kube_config_free(&cfg);
	put("kc-exec",
	    "current-context: c\nclusters:\n- name: k\n  cluster: {server: 'https://h:1'}\n"
	    "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
	    "users:\n- name: u\n  user:\n    exec: {command: aws}\n");
	snprintf(path, sizeof(path), "%s/kc-exec", dir);
	CHECK(kube_config_kubeconfig(&cfg, path, NULL, err, sizeof(err)) == -1);
	CHECK(strstr(err, "exec") != NULL);
	put("kc-bad", "clusters: [unclosed\n");
	snprintf(path, sizeof(path), "%s/kc-bad", dir);
	CHECK(kube_config_kubeconfig(&cfg, path, NULL, err, sizeof(err)) == -1);
	printf("bad kubeconfig: %s\n", err);
	free(cert);
	free(key);
	free(text);
}

static void test_base64(void)
{
	struct kube_blob b;

	CHECK(kube_base64_decode("aGVsbG8=", &b) == 0 && b.len == 5 && !memcmp(b.data, "hello", 5));
	free(b.data);
	CHECK(kube_base64_decode("aGVs\nbG8", &b) == 0 && b.len == 5);
	free(b.data);
	CHECK(kube_base64_decode("a*b", &b) == -1);
}

int main(void)
{
	char cmd[128];

	snprintf(dir, sizeof(dir), "/tmp/gpuqos-kcfg.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_format();
	test_base64();
	test_in_cluster();
	test_token_reread();
	test_kubeconfig_token();
	test_kubeconfig_cert();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
	CHECK_DONE();
}
