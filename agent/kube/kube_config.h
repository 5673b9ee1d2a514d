/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_config.h - where the Kubernetes API server is and how gpuqos proves
 * who it is: in-cluster service-account configuration or a kubeconfig
 * file, and the bearer token cache (re-read at most every 60 s and at once
 * after a 401, because projected service-account tokens rotate).
 * Does not own any connection or request: kube_client.h does.
 */
#ifndef GPUQOS_KUBE_CONFIG_H
#define GPUQOS_KUBE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define KUBE_TOKEN_REREAD_MS 60000u

/* PEM bytes decoded from a kubeconfig "-data" field; handed to libcurl as a
 * blob so no secret is ever written to disk. */
struct kube_blob {
	unsigned char *data;
	size_t len;
};

struct kube_config {
	char *server;       /* "https://host:port", no trailing slash */
	char *namespace;    /* our own namespace when known, else NULL */
	char *ca_file;      /* certificate authority: a file ... */
	struct kube_blob ca_data; /* ... or bytes */
	char *cert_file;    /* client certificate (PEM): a file ... */
	struct kube_blob cert_data; /* ... or bytes */
	char *key_file;     /* client key (PEM): a file ... */
	struct kube_blob key_data; /* ... or bytes */
	int insecure;       /* insecure-skip-tls-verify: tests and labs only */

	char *token_file;   /* re-read when due; NULL for a static token */
	char *token;        /* the bearer token to send, NULL for none */
	uint64_t token_read_ms;   /* monotonic ms of the last read */
	uint32_t token_reread_ms; /* KUBE_TOKEN_REREAD_MS unless a test sets it */
	int token_stale;    /* a 401 came back: re-read before the next request */
};

/* In-cluster: KUBERNETES_SERVICE_HOST/PORT and sa_dir/{token,ca.crt,
 * namespace}; sa_dir NULL means KUBE_SA_DIR. On failure returns -1 and
 * says why in err. */
int kube_config_in_cluster(struct kube_config *cfg, const char *sa_dir, char *err,
			   size_t errlen);

/* A kubeconfig file (YAML or JSON): the named context or current-context;
 * relative file paths are taken from the kubeconfig's folder. Supports the
 * token, tokenFile and client-certificate forms; names an unsupported user
 * form (exec, auth-provider) in err. */
int kube_config_kubeconfig(struct kube_config *cfg, const char *path, const char *context,
			   char *err, size_t errlen);

/* The bearer token to send at now_ms (monotonic), re-reading the token
 * file when it is due or stale. A failed re-read keeps the old token. */
const char *kube_config_token(struct kube_config *cfg, uint64_t now_ms);

/* The server said 401: the next kube_config_token() re-reads the file. */
void kube_config_token_rejected(struct kube_config *cfg);

void kube_config_free(struct kube_config *cfg);

/* "scheme://host:port" with an IPv6 literal host in brackets. Returns 0,
 * or -1 if it does not fit in len. */
int kube_format_server(char *buf, size_t len, const char *scheme, const char *host,
		       const char *port);

/* Standard base64 (RFC 4648, padding optional, whitespace skipped) into a
 * fresh blob. Returns 0 or -1 on bad input or no memory. */
int kube_base64_decode(const char *in, struct kube_blob *out);

#endif
