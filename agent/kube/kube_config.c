/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_config.c - loads the API server address and credentials (in-cluster
 * or kubeconfig) and keeps the bearer token fresh. Does not own requests
 * or TLS sessions: it only says which files and bytes libcurl should use.
 */
#include "agent/kube/kube_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

/* Tokens and namespaces are small; a bigger file is not one of them. */
#define KUBE_SMALL_FILE_MAX 65536

/* Reads a small file and strips trailing whitespace (a token file written
 * by hand often ends in a newline the server would reject). */
static char *read_small_file(const char *path, char *err, size_t errlen)
{
	char *buf = malloc(KUBE_SMALL_FILE_MAX + 1);
	size_t len = 0;
	int fd;

	if (!buf) {
		snprintf(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		free(buf);
		return NULL;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, KUBE_SMALL_FILE_MAX - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			close(fd);
			free(buf);
			return NULL;
		}
		if (n == 0 || (len += (size_t)n) == KUBE_SMALL_FILE_MAX)
			break;
	}
	close(fd);
	while (len > 0 && strchr(" \t\r\n", buf[len - 1]))
		len--;
	buf[len] = '\0';
	return buf;
}

int kube_format_server(char *buf, size_t len, const char *scheme, const char *host,
		       const char *port)
{
	/* An IPv6 literal must be bracketed in a URL; one already bracketed
	 * (or a name) is used as is. */
	int v6 = strchr(host, ':') && host[0] != '[';
	int n = snprintf(buf, len, "%s://%s%s%s:%s", scheme, v6 ? "[" : "", host, v6 ? "]" : "",
			 port);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int b64_value(int ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+')
		return 62;
	if (ch == '/')
		return 63;
	return -1;
}

int kube_base64_decode(const char *in, struct kube_blob *out)
{
	size_t cap = strlen(in) / 4 * 3 + 4, len = 0;
	unsigned char *p = malloc(cap);
	unsigned acc = 0, bits = 0;

	if (!p)
		return -1;
	for (const char *s = in; *s && *s != '='; s++) {
		int v = b64_value((unsigned char)*s);

		if (v < 0) {
			if (strchr(" \t\r\n", *s))
				continue;
			free(p);
			return -1;
		}
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			p[len++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	out->data = p;
	out->len = len;
	return 0;
}

static void config_init(struct kube_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->token_reread_ms = KUBE_TOKEN_REREAD_MS;
}

int kube_config_in_cluster(struct kube_config *cfg, const char *sa_dir, char *err,
			   size_t errlen)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	char server[512], path[4096];
	char sub[256];

	config_init(cfg);
	if (!sa_dir)
		sa_dir = KUBE_SA_DIR;
	if (!host || !*host || !port || !*port) {
		snprintf(err, errlen, "not in a cluster: KUBERNETES_SERVICE_HOST or "
			 "KUBERNETES_SERVICE_PORT is unset");
		return -1;
	}
	if (kube_format_server(server, sizeof(server), "https", host, port) != 0) {
		snprintf(err, errlen, "KUBERNETES_SERVICE_HOST is too long");
		return -1;
	}
	snprintf(path, sizeof(path), "%s/token", sa_dir);
	cfg->server = strdup(server);
	cfg->token_file = strdup(path);
	snprintf(path, sizeof(path), "%s/ca.crt", sa_dir);
	cfg->ca_file = strdup(path);
	if (!cfg->server || !cfg->token_file || !cfg->ca_file) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	/* The first token read must work: a pod without its token cannot
	 * talk to the API at all, which is a configuration error. */
	cfg->token = read_small_file(cfg->token_file, err, errlen);
	if (!cfg->token)
		goto fail;
	cfg->token_read_ms = kube_now_ms();
	snprintf(path, sizeof(path), "%s/namespace", sa_dir);
	cfg->namespace = read_small_file(path, sub, sizeof(sub)); /* optional */
	return 0;
fail:
	kube_config_free(cfg);
	return -1;
}

/* The "name"d entry of a kubeconfig list, e.g. contexts[name=x].context. */
static const cJSON *named_entry(const cJSON *root, const char *list, const char *field,
				const char *name)
{
	const cJSON *item;

	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(root, list)) {
		const char *n = kube_json_str(item, "name", NULL);

		if (n && strcmp(n, name) == 0)
			return cJSON_GetObjectItemCaseSensitive(item, field);
	}
	return NULL;
}

/* A string field, or NULL when absent or empty. */
static const char *field(const cJSON *obj, const char *key)
{
	const char *s = kube_json_str(obj, key, NULL);

	return s && *s ? s : NULL;
}

/* A kubeconfig path relative to the kubeconfig's own folder. */
static char *resolve_path(const char *kubeconfig, const char *p)
{
	const char *slash = strrchr(kubeconfig, '/');

	if (p[0] == '/' || !slash)
		return strdup(p);
	return kube_strdup_printf("%.*s/%s", (int)(slash - kubeconfig), kubeconfig, p);
}

static int load_file_or_data(const char *kc, const cJSON *obj, const char *file_key,
			     const char *data_key, char **file, struct kube_blob *data,
			     char *err, size_t errlen)
{
	const char *d = field(obj, data_key), *f = field(obj, file_key);

	if (d) {
		if (kube_base64_decode(d, data) != 0) {
			snprintf(err, errlen, "%s: %s is not valid base64", kc, data_key);
			return -1;
		}
	} else if (f && !(*file = resolve_path(kc, f))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static int load_cluster(struct kube_config *cfg, const char *kc, const cJSON *cl, char *err,
			size_t errlen)
{
	const char *server = field(cl, "server"), *insecure = field(cl, "insecure-skip-tls-verify");
	size_t n;

	if (!server) {
		snprintf(err, errlen, "%s: cluster has no server", kc);
		return -1;
	}
	cfg->server = strdup(server);
	if (!cfg->server) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	n = strlen(cfg->server);
	while (n > 0 && cfg->server[n - 1] == '/')
		cfg->server[--n] = '\0';
	cfg->insecure = insecure && strcmp(insecure, "true") == 0;
	return load_file_or_data(kc, cl, "certificate-authority", "certificate-authority-data",
				 &cfg->ca_file, &cfg->ca_data, err, errlen);
}

static int load_user(struct kube_config *cfg, const char *kc, const cJSON *user, char *err,
		     size_t errlen)
{
	const char *token = field(user, "token"), *token_file = field(user, "tokenFile");

	if (cJSON_GetObjectItemCaseSensitive(user, "exec") ||
	    cJSON_GetObjectItemCaseSensitive(user, "auth-provider")) {
		snprintf(err, errlen, "%s: user uses %s, which gpuqos does not support; use a "
			 "token, tokenFile or client certificate", kc,
			 cJSON_GetObjectItemCaseSensitive(user, "exec") ? "exec" : "auth-provider");
		return -1;
	}
	if (load_file_or_data(kc, user, "client-certificate", "client-certificate-data",
			      &cfg->cert_file, &cfg->cert_data, err, errlen) != 0 ||
	    load_file_or_data(kc, user, "client-key", "client-key-data", &cfg->key_file,
			      &cfg->key_data, err, errlen) != 0)
		return -1;
	if ((cfg->cert_file || cfg->cert_data.data) != (cfg->key_file || cfg->key_data.data)) {
		snprintf(err, errlen, "%s: a client certificate needs both certificate and key", kc);
		return -1;
	}
	if (token) {
		cfg->token = strdup(token);
		if (!cfg->token) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	} else if (token_file) {
		cfg->token_file = resolve_path(kc, token_file);
		if (!cfg->token_file || !(cfg->token = read_small_file(cfg->token_file, err, errlen)))
			return -1;
		cfg->token_read_ms = kube_now_ms();
	}
	return 0;
}

static int load_context(struct kube_config *cfg, const char *kc, const cJSON *root,
			const char *context, char *err, size_t errlen)
{
	const cJSON *ctx = named_entry(root, "contexts", "context", context), *cl, *user;
	const char *cl_name = field(ctx, "cluster"), *user_name = field(ctx, "user");
	const char *ns = field(ctx, "namespace");

	if (!ctx || !cl_name) {
		snprintf(err, errlen, "%s: context \"%s\" not found or has no cluster", kc, context);
		return -1;
	}
	cl = named_entry(root, "clusters", "cluster", cl_name);
	if (!cl) {
		snprintf(err, errlen, "%s: cluster \"%s\" not found", kc, cl_name);
		return -1;
	}
	if (load_cluster(cfg, kc, cl, err, errlen) != 0)
		return -1;
	if (user_name) {
		user = named_entry(root, "users", "user", user_name);
		if (!user) {
			snprintf(err, errlen, "%s: user \"%s\" not found", kc, user_name);
			return -1;
		}
		if (load_user(cfg, kc, user, err, errlen) != 0)
			return -1;
	}
	if (ns && !(cfg->namespace = strdup(ns))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int kube_config_kubeconfig(struct kube_config *cfg, const char *path, const char *context,
			   char *err, size_t errlen)
{
	cJSON *root;
	int rc;

	config_init(cfg);
	root = kube_yaml_load(path, err, errlen);
	if (!root)
		return -1;
	if (!context)
		context = field(root, "current-context");
	if (!context) {
		snprintf(err, errlen, "%s: no context given and no current-context", path);
		cJSON_Delete(root);
		return -1;
	}
	rc = load_context(cfg, path, root, context, err, errlen);
	cJSON_Delete(root);
	if (rc != 0)
		kube_config_free(cfg);
	return rc;
}

const char *kube_config_token(struct kube_config *cfg, uint64_t now_ms)
{
	char err[512];
	char *t;

	if (!cfg->token_file)
		return cfg->token;
	if (!cfg->token_stale && now_ms - cfg->token_read_ms < cfg->token_reread_ms)
		return cfg->token;
	cfg->token_read_ms = now_ms;
	cfg->token_stale = 0;
	t = read_small_file(cfg->token_file, err, sizeof(err));
	if (!t) {
		log_warn("kube: re-reading the token: %s; keeping the previous one", err);
		return cfg->token;
	}
	if (!cfg->token || strcmp(t, cfg->token) != 0)
		log_info("kube: token %s changed, using the new one", cfg->token_file);
	free(cfg->token);
	cfg->token = t;
	return t;
}

void kube_config_token_rejected(struct kube_config *cfg)
{
	cfg->token_stale = 1;
}

void kube_config_free(struct kube_config *cfg)
{
	free(cfg->server);
	free(cfg->namespace);
	free(cfg->ca_file);
	free(cfg->ca_data.data);
	free(cfg->cert_file);
	free(cfg->cert_data.data);
	free(cfg->key_file);
	free(cfg->key_data.data);
	free(cfg->token_file);
	free(cfg->token);
	config_init(cfg);
}
