/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_yaml.c - turns one YAML document (a kubeconfig) into a cJSON tree so
 * the rest of agent/kube reads a single format; JSON is YAML, so JSON
 * kubeconfigs load too. Every scalar becomes a string: the kubeconfig
 * reader decides what a value means. Does not own the kubeconfig schema.
 */
#include "agent/kube/kube_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

/* Aliases may form cycles; a kubeconfig is never this deep. */
#define KUBE_YAML_MAX_DEPTH 32

static cJSON *yaml_node_to_json(yaml_document_t *doc, yaml_node_t *n, int depth);

static cJSON *yaml_mapping_to_json(yaml_document_t *doc, yaml_node_t *n, int depth)
{
	cJSON *obj = cJSON_CreateObject();

	if (!obj)
		return NULL;
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(doc, p->key);
		yaml_node_t *v = yaml_document_get_node(doc, p->value);
		cJSON *jv;

		if (!k || !v || k->type != YAML_SCALAR_NODE)
			goto fail;
		jv = yaml_node_to_json(doc, v, depth + 1);
		if (!jv)
			goto fail;
		if (!cJSON_AddItemToObject(obj, (const char *)k->data.scalar.value, jv)) {
			cJSON_Delete(jv);
			goto fail;
		}
	}
	return obj;
fail:
	cJSON_Delete(obj);
	return NULL;
}

static cJSON *yaml_sequence_to_json(yaml_document_t *doc, yaml_node_t *n, int depth)
{
	cJSON *arr = cJSON_CreateArray();

	if (!arr)
		return NULL;
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *v = yaml_document_get_node(doc, *i);
		cJSON *jv = v ? yaml_node_to_json(doc, v, depth + 1) : NULL;

		if (!jv || !cJSON_AddItemToArray(arr, jv)) {
			cJSON_Delete(jv);
			cJSON_Delete(arr);
			return NULL;
		}
	}
	return arr;
}

static cJSON *yaml_node_to_json(yaml_document_t *doc, yaml_node_t *n, int depth)
{
	if (depth > KUBE_YAML_MAX_DEPTH)
		return NULL;
	switch (n->type) {
	case YAML_SCALAR_NODE:
		/* "null" and "~" mean absent; treating them as empty strings
		 * makes every reader's "is it set" test the same. */
		if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
		    (strcmp((const char *)n->data.scalar.value, "null") == 0 ||
		     strcmp((const char *)n->data.scalar.value, "~") == 0))
			return cJSON_CreateString("");
		return cJSON_CreateString((const char *)n->data.scalar.value);
	case YAML_MAPPING_NODE:
		return yaml_mapping_to_json(doc, n, depth);
	case YAML_SEQUENCE_NODE:
		return yaml_sequence_to_json(doc, n, depth);
	default:
		return NULL;
	}
}

cJSON *kube_yaml_load(const char *path, char *err, size_t errlen)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	yaml_node_t *root;
	cJSON *out = NULL;
	FILE *f = fopen(path, "rb");

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (!yaml_parser_initialize(&parser)) {
		snprintf(err, errlen, "%s: YAML parser: out of memory", path);
		fclose(f);
		return NULL;
	}
	yaml_parser_set_input_file(&parser, f);
	if (!yaml_parser_load(&parser, &doc)) {
		snprintf(err, errlen, "%s: line %zu: %s", path, parser.problem_mark.line + 1,
			 parser.problem ? parser.problem : "YAML syntax error");
		goto out_parser;
	}
	root = yaml_document_get_root_node(&doc);
	if (!root)
		snprintf(err, errlen, "%s: empty document", path);
	else if (!(out = yaml_node_to_json(&doc, root, 0)))
		snprintf(err, errlen, "%s: unsupported YAML (non-string key, or nested too deep)", path);
	yaml_document_delete(&doc);
out_parser:
	yaml_parser_delete(&parser);
	fclose(f);
	return out;
}
