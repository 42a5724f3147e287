// SPDX-License-Identifier: MIT
/*
 * The public API of include/ppipe.h.
 *
 * Layer: interpose (may use: interpose, operations, engine, pipes, resources, base).
 */
#include "ppipe.h"

#include "compiler.h"
#include "config.h"
#include "engine.h"
#include "fdtable.h"
#include "init.h"
#include "log.h"
#include "pipe.h"
#include "pool.h"
#include "psi.h"
#include "registry.h"
#include "ring.h"
#include "stats.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

PP_EXPORT const char *ppipe_version(void)
{
	return PPIPE_VERSION;
}

static void sum_pipe(struct pp_pipe *p, void *arg)
{
	struct pp_counters *c = arg;

	for (int i = 0; i < PP_CNT_COUNT; i++)
		c->v[i] += __atomic_load_n(&p->cnt.v[i], __ATOMIC_RELAXED);
}

PP_EXPORT int ppipe_stats_get(struct ppipe_stats *out)
{
	struct ppipe_stats all;
	struct pp_stats_registry reg;
	struct pp_counters c;
	size_t room;

	if (!out || out->size < PPIPE_STATS_SIZE_V1) {
		errno = EINVAL;
		return -1;
	}
	for (int i = 0; i < PP_CNT_COUNT; i++)
		c.v[i] = __atomic_load_n(&pp_totals_closed.v[i], __ATOMIC_RELAXED);
	pp_pipes_for_each(sum_pipe, &c);
	pp_reg_occupancy(&reg);
	all = (struct ppipe_stats){
		.version = 3,
		.writes_accelerated = c.v[PP_CNT_writes_accelerated],
		.bytes_accelerated = c.v[PP_CNT_bytes_accelerated],
		.writes_passthrough = c.v[PP_CNT_writes_passthrough],
		.bytes_passthrough = c.v[PP_CNT_bytes_passthrough],
		.fallbacks = c.v[PP_CNT_fallbacks],
		.pool_bytes = pp_pool_bytes(),
		.pool_peak = pp_pool_peak(),
		.pool_trimmed_bytes = pp_rings_trimmed_bytes(),
		.pressure_episodes = pp_psi_episodes(),
		.registry_slots = reg.slots,
		.registry_slots_max = reg.slots_max,
		.registry_records = reg.records,
		.registry_records_max = reg.records_max,
		.registry_reclaimed = reg.reclaimed,
		.registry_full = reg.full,
	};
	room = out->size < sizeof(all) ? out->size : sizeof(all);
	all.size = room;
	memcpy(out, &all, room);
	return 0;
}

PP_EXPORT int ppipe_stats_dump(int fd)
{
	long r = pp_sys_fcntl(fd, F_GETFD, 0);

	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	pp_stats_report_fd(fd);
	return 0;
}

PP_EXPORT int ppipe_flush(int fd)
{
	long r = pp_sys_fcntl(fd, F_GETFD, 0);

	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	if (pp_engine_hooks()) {
		enum pp_end end;
		struct pp_pipe *p = pp_fdt_enter(fd, &end);
		int e = 0;

		if (p) {
			if (end == PP_END_WRITE && pp_engine_holds(p))
				e = pp_engine->flush(p, false);
			pp_pipe_leave(p);
		}
		if (e) {
			errno = -e;
			return -1;
		}
	}
	return 0;
}
