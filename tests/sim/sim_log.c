/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_log.c - bounded call log (see sim_log.h). When full, the oldest
 * records go; seq keeps counting so a reader can tell.
 */
#include "sim_log.h"

#include <pthread.h>
#include <stdlib.h>

struct sim_log {
	pthread_mutex_t lock;
	struct sim_log_rec *ring;
	unsigned cap;
	unsigned head; /* index of the oldest record */
	unsigned n;
	uint64_t next_seq;
};

struct sim_log *sim_log_new(unsigned capacity)
{
	struct sim_log *log = calloc(1, sizeof(*log));
	if (!log)
		return NULL;
	log->ring = calloc(capacity, sizeof(*log->ring));
	if (!log->ring || pthread_mutex_init(&log->lock, NULL) != 0) {
		free(log->ring);
		free(log);
		return NULL;
	}
	log->cap = capacity;
	log->next_seq = 1;
	return log;
}

void sim_log_destroy(struct sim_log *log)
{
	if (!log)
		return;
	pthread_mutex_destroy(&log->lock);
	free(log->ring);
	free(log);
}

void sim_log_add(struct sim_log *log, struct sim_log_rec *rec)
{
	pthread_mutex_lock(&log->lock);
	rec->seq = log->next_seq++;
	if (log->n == log->cap) {
		log->ring[log->head] = *rec;
		log->head = (log->head + 1) % log->cap;
	} else {
		log->ring[(log->head + log->n) % log->cap] = *rec;
		log->n++;
	}
	pthread_mutex_unlock(&log->lock);
}

void sim_log_reset(struct sim_log *log)
{
	pthread_mutex_lock(&log->lock);
	log->head = 0;
	log->n = 0;
	pthread_mutex_unlock(&log->lock);
}

static void sim_log_rec_json(const struct sim_log_rec *r, struct sim_buf *b)
{
	sim_buf_printf(b, "{\"seq\":%llu,\"t_us\":%llu,\"pid\":%d,\"tid\":%d,\"fh\":%llu,"
		       "\"request\":\"0x%08x\",\"kind\":\"%s\",\"form\":\"%s\",\"xfer\":%s,"
		       "\"errno\":%d",
		       (unsigned long long)r->seq, (unsigned long long)r->t_us, (int)r->pid,
		       (int)r->tid, (unsigned long long)r->fh, r->request, r->kind, r->form,
		       r->xfer ? "true" : "false", r->err);
	if (r->has_status) {
		sim_buf_printf(b, ",\"status\":\"0x%02x\",\"client\":\"0x%08x\","
			       "\"object\":\"0x%08x\"", r->status, r->client, r->object);
		if (r->kind[0] == 'a' || r->kind[0] == 'f')
			sim_buf_printf(b, ",\"parent\":\"0x%08x\"", r->parent);
		if (r->kind[0] == 'a')
			sim_buf_printf(b, ",\"class\":\"0x%04x\"", r->cls);
		if (r->kind[0] == 'c')
			sim_buf_printf(b, ",\"cmd\":\"0x%08x\"", r->cmd);
	}
	sim_buf_printf(b, ",\"params\":{");
	for (int i = 0; i < r->nparams; i++)
		sim_buf_printf(b, "%s\"%s\":%llu", i ? "," : "", r->pname[i],
			       (unsigned long long)r->pval[i]);
	sim_buf_printf(b, "},\"dur_us\":%llu}\n", (unsigned long long)r->dur_us);
}

void sim_log_json(struct sim_log *log, struct sim_buf *b)
{
	pthread_mutex_lock(&log->lock);
	for (unsigned i = 0; i < log->n; i++)
		sim_log_rec_json(&log->ring[(log->head + i) % log->cap], b);
	pthread_mutex_unlock(&log->lock);
}
