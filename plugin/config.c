/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.c - loads and validates the device plugin's configuration
 * (config.h). Every value is checked before any is stored: a bad file,
 * variable or flag changes nothing and names itself in the error.
 */
#include "plugin/config.h"
#include "plugin/metrics.h"
#include "abi/gq_proto.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((format(printf, 3, 4))) static int bad(char *err, size_t errlen, const char *fmt,
						      ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

void pcfg_defaults(struct plugin_config *c)
{
	memset(c, 0, sizeof(*c));
	c->mode = PCFG_SHARES;
	strcpy(c->resource, "gpuqos.io/gpu");
	strcpy(c->lc_resource, "gpuqos.io/gpu-lc");
	strcpy(c->inject_resource, "gpuqos.io/qos");
	c->replicas = 4;
	c->lc_replicas = 1;
	c->inject_devices = 100;
	c->visibility = PCFG_VIS_ENVVAR;
	c->injection = PCFG_INJ_LD_PRELOAD;
	c->preferred = PCFG_PREF_SPREAD;
	strcpy(c->device_plugin_dir, "/var/lib/kubelet/device-plugins");
	/* The node agent's default --socket lives there (abi/gq_proto.h); its
	 * control socket and state file do not (gpuqos-agent refuses that). */
	strcpy(c->node_agent_socket_dir, GQ_DEFAULT_SOCKET_DIR);
	strcpy(c->preempt_lib_dir, "/var/lib/gpuqos/lib");
	strcpy(c->nvidiactl, "/dev/nvidiactl");
	strcpy(c->sysfs_root, "/sys");
	strcpy(c->procfs_root, "/proc");
	strcpy(c->nvml_lib, "libnvidia-ml.so.1");
	strcpy(c->metrics_address, PMETRICS_DEFAULT_ADDRESS);
	strcpy(c->health_address, PMETRICS_DEFAULT_HEALTH_ADDRESS);
	c->log_level = LOG_LEVEL_INFO;
}

/* "domain/name" as Kubernetes extended resources spell it; never in the
 * kubernetes.io domain, which the kubelet refuses. */
static int check_resource(const char *key, const char *v, char *err, size_t errlen)
{
	const char *slash = strchr(v, '/');
	size_t n = strlen(v);

	if (!slash || slash == v || !slash[1] || strchr(slash + 1, '/') || n >= PCFG_NAME_MAX ||
	    strlen(slash + 1) > 63)
		return bad(err, errlen, "%s \"%s\": want \"domain/name\" (name at most 63 characters)",
			   key, v);
	for (const char *p = v; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '.' || *p == '-' || *p == '_' || *p == '/'))
			return bad(err, errlen, "%s \"%s\": character '%c' not allowed", key, v, *p);
	if (strncmp(v, "kubernetes.io/", 14) == 0 || strstr(v, ".kubernetes.io/"))
		return bad(err, errlen, "%s \"%s\": the kubernetes.io domain is reserved", key, v);
	return 0;
}

static int pick(const char *key, const char *v, const char *const *names, size_t n, int *out,
		char *err, size_t errlen)
{
	char want[128] = "";

	for (size_t i = 0; i < n; i++) {
		if (strcmp(v, names[i]) == 0) {
			*out = (int)i;
			return 0;
		}
		snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%s", i ? ", " : "",
			 names[i]);
	}
	return bad(err, errlen, "%s \"%s\": want one of %s", key, v, want);
}

static const char *const mode_names[] = { "shares", "inject" };
static const char *const vis_names[] = { "envvar", "cdi", "devices" };
static const char *const inj_names[] = { "ld-preload", "ld-so-preload", "none" };
static const char *const pref_names[] = { "spread", "pack" };
#define N(a) (sizeof(a) / sizeof((a)[0]))

static int json_uint(const cJSON *v, const char *key, unsigned lo, unsigned hi, unsigned *out,
		     char *err, size_t errlen)
{
	if (!cJSON_IsNumber(v) || v->valuedouble != (double)(long long)v->valuedouble ||
	    v->valuedouble < lo || v->valuedouble > hi)
		return bad(err, errlen, "config: \"%s\" must be an integer from %u to %u", key, lo, hi);
	*out = (unsigned)v->valuedouble;
	return 0;
}

static int json_enum(const cJSON *v, const char *key, const char *const *names, size_t n, int *out,
		     char *err, size_t errlen)
{
	if (!cJSON_IsString(v))
		return bad(err, errlen, "config: \"%s\" must be a string", key);
	return pick(key, v->valuestring, names, n, out, err, errlen);
}

static int json_resource(const cJSON *v, const char *key, char *out, char *err, size_t errlen)
{
	if (!cJSON_IsString(v))
		return bad(err, errlen, "config: \"%s\" must be a string", key);
	if (check_resource(key, v->valuestring, err, errlen) < 0)
		return -1;
	strcpy(out, v->valuestring);
	return 0;
}

/* One key of the file into n (a copy); unknown keys are errors. */
static int json_key(struct plugin_config *n, const cJSON *v, char *err, size_t errlen)
{
	const char *k = v->string;
	int e = 0, rc;

	if (strcmp(k, "version") == 0) {
		unsigned ver = 0;
		if (json_uint(v, k, 1, 1000, &ver, err, errlen) < 0)
			return -1;
		if (ver != PCFG_VERSION)
			return bad(err, errlen, "config: version %u not supported (this plugin reads %d)",
				   ver, PCFG_VERSION);
		return 0;
	}
	if (strcmp(k, "mode") == 0) {
		rc = json_enum(v, k, mode_names, N(mode_names), &e, err, errlen);
		n->mode = (enum pcfg_mode)e;
		return rc;
	}
	if (strcmp(k, "resourceName") == 0)
		return json_resource(v, k, n->resource, err, errlen);
	if (strcmp(k, "lcResourceName") == 0)
		return json_resource(v, k, n->lc_resource, err, errlen);
	if (strcmp(k, "injectResourceName") == 0)
		return json_resource(v, k, n->inject_resource, err, errlen);
	if (strcmp(k, "replicas") == 0)
		return json_uint(v, k, 1, PCFG_MAX_REPLICAS, &n->replicas, err, errlen);
	if (strcmp(k, "lcReplicas") == 0)
		return json_uint(v, k, 0, PCFG_MAX_REPLICAS, &n->lc_replicas, err, errlen);
	if (strcmp(k, "injectDevices") == 0)
		return json_uint(v, k, 1, PCFG_MAX_INJECT, &n->inject_devices, err, errlen);
	if (strcmp(k, "visibility") == 0) {
		rc = json_enum(v, k, vis_names, N(vis_names), &e, err, errlen);
		n->visibility = (enum pcfg_visibility)e;
		return rc;
	}
	if (strcmp(k, "injection") == 0) {
		rc = json_enum(v, k, inj_names, N(inj_names), &e, err, errlen);
		n->injection = (enum pcfg_injection)e;
		return rc;
	}
	if (strcmp(k, "preferredAllocation") == 0) {
		rc = json_enum(v, k, pref_names, N(pref_names), &e, err, errlen);
		n->preferred = (enum pcfg_preferred)e;
		return rc;
	}
	return bad(err, errlen, "config: unknown key \"%s\"", k);
}

/* Where the parse stopped, as an editor counts (line and column from 1)
 * and as a byte offset, with the text around it on its line: cJSON stops
 * on the fault or just after it, so a typo can be found either way. */
static int json_syntax_error(const char *text, size_t len, const char *at, char *err,
			     size_t errlen)
{
	size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : len;
	size_t bol = 0, from, to, blank = 0, k = 0;
	unsigned line = 1;
	char near[48];

	while (blank < len && text[blank] && strchr(" \t\r\n", text[blank]))
		blank++;
	if (blank == len)
		return bad(err, errlen, "config: JSON syntax error: the file is empty; it must hold "
			   "at least {\"version\": %d}", PCFG_VERSION);
	for (size_t i = 0; i < off; i++) {
		if (text[i] == '\n') {
			line++;
			bol = i + 1;
		}
	}
	from = off - bol > 16 ? off - 16 : bol;
	for (to = from; to < len && text[to] != '\n' && to < off + 16; to++)
		near[k++] = text[to] >= 0x20 && text[to] < 0x7f ? text[to] : '?';
	near[k] = '\0';
	return bad(err, errlen, "config: JSON syntax error at line %u, column %zu (byte %zu)%s%s%s%s",
		   line, off - bol + 1, off, k ? ", near '" : "", near, k ? "'" : "",
		   off >= len ? ": the file ends there" : "");
}

static const char *json_type(const cJSON *j)
{
	return cJSON_IsArray(j) ? "an array" : cJSON_IsString(j) ? "a string" :
	       cJSON_IsNumber(j) ? "a number" : cJSON_IsBool(j) ? "a boolean" :
	       cJSON_IsNull(j) ? "null" : "something else";
}

int pcfg_apply_json(struct plugin_config *c, const char *text, size_t len, char *err,
		    size_t errlen)
{
	struct plugin_config n = *c;
	const char *at = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(text, len, &at, 0);
	const cJSON *v;
	int rc = 0, have_version = 0;

	if (!root)
		return json_syntax_error(text, len, at, err, errlen);
	if (!cJSON_IsObject(root)) {
		rc = bad(err, errlen, "config: must hold one JSON object, got %s", json_type(root));
		cJSON_Delete(root);
		return rc;
	}
	cJSON_ArrayForEach(v, root)
	{
		if (strcmp(v->string, "version") == 0)
			have_version = 1;
		if ((rc = json_key(&n, v, err, errlen)) < 0)
			break;
	}
	cJSON_Delete(root);
	if (rc < 0)
		return -1;
	if (!have_version)
		return bad(err, errlen, "config: \"version\": %d is required", PCFG_VERSION);
	if (strcmp(n.resource, n.lc_resource) == 0)
		return bad(err, errlen, "config: resourceName and lcResourceName are both \"%s\"",
			   n.resource);
	*c = n;
	return 0;
}

static int load_file(struct plugin_config *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *buf;
	size_t n;
	int rc;

	if (!f)
		return bad(err, errlen, "config %s: %s", path, strerror(errno));
	buf = malloc(PCFG_MAX_FILE + 1);
	if (!buf) {
		fclose(f);
		return bad(err, errlen, "config %s: out of memory", path);
	}
	n = fread(buf, 1, PCFG_MAX_FILE + 1, f);
	rc = ferror(f) ? bad(err, errlen, "config %s: read error", path) : 0;
	fclose(f);
	if (!rc && n > PCFG_MAX_FILE)
		rc = bad(err, errlen, "config %s: larger than %u bytes", path, PCFG_MAX_FILE);
	if (!rc && pcfg_apply_json(c, buf, n, err, errlen) < 0) {
		char inner[512];
		snprintf(inner, sizeof(inner), "%s", err);
		rc = bad(err, errlen, "%s: %s", path, inner);
	}
	free(buf);
	return rc;
}

enum opt_id {
	O_CONFIG = 1, O_MODE, O_DIR, O_AGENT_DIR, O_LIB_DIR, O_CTL, O_LOG, O_SYSFS, O_PROCFS,
	O_NVML, O_METRICS, O_HEALTH, O_HELP, O_VERSION,
};

struct opt_def {
	const char *flag, *env;
	enum opt_id id;
};

static const struct opt_def opts[] = {
	{ "config", "GPUQOS_PLUGIN_CONFIG", O_CONFIG },
	{ "mode", "GPUQOS_PLUGIN_MODE", O_MODE },
	{ "device-plugin-dir", "GPUQOS_DEVICE_PLUGIN_DIR", O_DIR },
	{ "node-agent-socket-dir", "GPUQOS_NODE_AGENT_SOCKET_DIR", O_AGENT_DIR },
	{ "preempt-lib-dir", "GPUQOS_PREEMPT_LIB_DIR", O_LIB_DIR },
	{ "nvidiactl", "GPUQOS_NVIDIACTL", O_CTL },
	{ "log-level", "GPUQOS_LOG_LEVEL", O_LOG },
	{ "sysfs-root", "GPUQOS_SYSFS_ROOT", O_SYSFS },
	{ "procfs-root", "GPUQOS_PROCFS_ROOT", O_PROCFS },
	{ "nvml-lib", "GPUQOS_NVML_LIB", O_NVML },
	{ "metrics-address", "GPUQOS_PLUGIN_METRICS_ADDRESS", O_METRICS },
	{ "health-address", "GPUQOS_PLUGIN_HEALTH_ADDRESS", O_HEALTH },
};

static int set_path(char *dst, const char *name, const char *v, int absolute, char *err,
		    size_t errlen)
{
	if (!v[0] || strlen(v) >= PATH_MAX || (absolute && v[0] != '/'))
		return bad(err, errlen, "%s \"%s\": want a%s path", name, v,
			   absolute ? "n absolute" : "");
	strcpy(dst, v);
	return 0;
}

_Static_assert(sizeof(((struct plugin_config *)0)->metrics_address) == PMETRICS_ADDRESS_MAX &&
		       sizeof(((struct plugin_config *)0)->health_address) == PMETRICS_ADDRESS_MAX,
	       "an address field holds what metrics.c accepts");

/* dst is PMETRICS_ADDRESS_MAX bytes. */
static int set_address(char *dst, const char *what, const char *name, const char *v, char *err,
		       size_t errlen)
{
	if (strlen(v) >= PMETRICS_ADDRESS_MAX)
		return bad(err, errlen, "%s: longer than %d characters", name,
			   PMETRICS_ADDRESS_MAX - 1);
	if (pmetrics_check_address(what, v, err, errlen) < 0)
		return -1;
	strcpy(dst, v);
	return 0;
}

static int set_one(struct plugin_config *c, enum opt_id id, const char *name, const char *v,
		   char *err, size_t errlen)
{
	int e = 0;

	switch (id) {
	case O_MODE:
		if (pick(name, v, mode_names, N(mode_names), &e, err, errlen) < 0)
			return -1;
		c->mode = (enum pcfg_mode)e;
		return 0;
	case O_DIR:
		return set_path(c->device_plugin_dir, name, v, 1, err, errlen);
	case O_AGENT_DIR:
		return set_path(c->node_agent_socket_dir, name, v, 1, err, errlen);
	case O_LIB_DIR:
		return set_path(c->preempt_lib_dir, name, v, 1, err, errlen);
	case O_CTL:
		return set_path(c->nvidiactl, name, v, 1, err, errlen);
	case O_SYSFS:
		return set_path(c->sysfs_root, name, v, 1, err, errlen);
	case O_PROCFS:
		return set_path(c->procfs_root, name, v, 1, err, errlen);
	case O_NVML:
		return set_path(c->nvml_lib, name, v, 0, err, errlen);
	case O_METRICS:
		return set_address(c->metrics_address, "metrics", name, v, err, errlen);
	case O_HEALTH:
		return set_address(c->health_address, "health", name, v, err, errlen);
	case O_LOG: {
		enum log_level l;
		if (log_parse_level(v, &l) < 0)
			return bad(err, errlen, "%s \"%s\": want error, warn, info or debug", name, v);
		c->log_level = l;
		return 0;
	}
	default:
		return 0;
	}
}

static void usage(void)
{
	printf("usage: gpuqos-device-plugin [options]\n"
	       "  --config PATH              JSON config file (GPUQOS_PLUGIN_CONFIG)\n"
	       "  --mode shares|inject       overrides the config's mode (GPUQOS_PLUGIN_MODE)\n"
	       "  --device-plugin-dir DIR    kubelet.sock and our sockets (GPUQOS_DEVICE_PLUGIN_DIR,\n"
	       "                             /var/lib/kubelet/device-plugins)\n"
	       "  --node-agent-socket-dir DIR  node agent's socket dir, mounted into containers\n"
	       "                             (GPUQOS_NODE_AGENT_SOCKET_DIR, " GQ_DEFAULT_SOCKET_DIR ")\n"
	       "  --preempt-lib-dir DIR      versioned preempt-agent installs and `current`\n"
	       "                             (GPUQOS_PREEMPT_LIB_DIR, /var/lib/gpuqos/lib)\n"
	       "  --nvidiactl PATH           RM control device (GPUQOS_NVIDIACTL, /dev/nvidiactl)\n"
	       "  --log-level LEVEL          error, warn, info, debug (GPUQOS_LOG_LEVEL, info)\n"
	       "  --sysfs-root DIR           where PCI NUMA nodes are read (GPUQOS_SYSFS_ROOT, /sys)\n"
	       "  --procfs-root DIR          where device minors are read (GPUQOS_PROCFS_ROOT, /proc)\n"
	       "  --nvml-lib PATH|none       NVML for XID health events (GPUQOS_NVML_LIB,\n"
	       "                             libnvidia-ml.so.1)\n"
	       "  --metrics-address ADDR|off Prometheus /metrics, e.g. :9403 or 127.0.0.1:9403\n"
	       "                             (GPUQOS_PLUGIN_METRICS_ADDRESS, " PMETRICS_DEFAULT_ADDRESS ")\n"
	       "  --health-address ADDR|off  /healthz alone, for the kubelet's probes\n"
	       "                             (GPUQOS_PLUGIN_HEALTH_ADDRESS, " PMETRICS_DEFAULT_HEALTH_ADDRESS ")\n"
	       "  --help, --version\n"
	       "Flags win over the environment, the environment over the file.\n"
	       "Reference: docs/device-plugin.md\n");
}

/* Flags are collected first so the file they name is applied before the
 * environment and the other flags. */
int pcfg_load(struct plugin_config *c, int argc, char **argv, char *err, size_t errlen)
{
	struct option lo[N(opts) + 3];
	const char *flag_val[O_VERSION + 1] = { 0 };
	const char *cfg;
	int o;

	pcfg_defaults(c);
	for (size_t i = 0; i < N(opts); i++)
		lo[i] = (struct option){ opts[i].flag, required_argument, NULL, (int)opts[i].id };
	lo[N(opts)] = (struct option){ "help", no_argument, NULL, O_HELP };
	lo[N(opts) + 1] = (struct option){ "version", no_argument, NULL, O_VERSION };
	lo[N(opts) + 2] = (struct option){ 0, 0, 0, 0 };
	optind = 1;
	opterr = 0;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (o == O_HELP) {
			usage();
			return 1;
		}
		if (o == O_VERSION) {
			printf("gpuqos-device-plugin %s\n", GPUQOS_VERSION);
			return 1;
		}
		if (o <= 0 || o > O_VERSION)
			return bad(err, errlen, "unknown or incomplete option %s (see --help)",
				   argv[optind - 1]);
		flag_val[o] = optarg;
	}
	if (optind < argc)
		return bad(err, errlen, "unexpected argument \"%s\" (see --help)", argv[optind]);
	cfg = flag_val[O_CONFIG] ? flag_val[O_CONFIG] : getenv("GPUQOS_PLUGIN_CONFIG");
	if (cfg && cfg[0] && load_file(c, cfg, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < N(opts); i++) {
		const char *ev = getenv(opts[i].env);
		if (opts[i].id != O_CONFIG && ev && ev[0] &&
		    set_one(c, opts[i].id, opts[i].env, ev, err, errlen) < 0)
			return -1;
	}
	for (size_t i = 0; i < N(opts); i++) {
		char name[64];
		snprintf(name, sizeof(name), "--%s", opts[i].flag);
		if (flag_val[opts[i].id] &&
		    set_one(c, opts[i].id, name, flag_val[opts[i].id], err, errlen) < 0)
			return -1;
	}
	return 0;
}
