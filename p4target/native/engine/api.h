/* api.h: every function Python calls (through ctypes, p4target/native/binding.py; a test checks
 * that table against these declarations).
 *
 * One mutex guards the state and the traffic manager: the packet loop holds it per batch, the
 * control plane (eng_lock/eng_unlock) around a whole write batch. Calls returning int report
 * running out of memory as -1 (the state is then unchanged). */
#ifndef AGGNET_API_H
#define AGGNET_API_H
#include "program.h"

#define ENG_API __attribute__((visibility("default")))

typedef struct engine engine_t;

/* life cycle, lock, counts */
ENG_API engine_t *eng_new(u64 seed);
ENG_API void eng_free(engine_t *E);
ENG_API void eng_lock(engine_t *E);
ENG_API void eng_unlock(engine_t *E);
ENG_API u64 eng_dropped_no_port(engine_t *E);
ENG_API u64 eng_pipeline_errors(engine_t *E);

/* tables (tables.c) */
ENG_API void eng_table_setup(engine_t *E, int tid, int lpm, int lpm_width, int prio_mode);
ENG_API int eng_table_add(engine_t *E, int tid, const u64 *v, const u64 *m, const u64 *hi, const u8 *kind,
                          int64_t prio, int action, const u64 *args, int nargs);
ENG_API int eng_table_modify(engine_t *E, int handle, int action, const u64 *args, int nargs);
ENG_API void eng_table_delete(engine_t *E, int tid, int handle);
/* A run of one table's writes in one call (what a P4Runtime Write changes in a table): op[i] 0 adds an entry (its
 * key the next nkeys words of v, m, hi and kind, its priority the next of prio), 1 gives entry handle[i] a new
 * action, 2 deletes entry handle[i]; a handle -(j + 1) names the entry op j added. Adds and modifies take the next
 * nargs[i] words of args as action[i]'s arguments. added[i]: the handle op i added (-1: none). All or nothing: 0,
 * or -1 without memory and the table as it was. */
ENG_API int eng_table_batch(engine_t *E, int tid, int n, const u8 *op, const int *handle, const u64 *v,
                            const u64 *m, const u64 *hi, const u8 *kind, const int64_t *prio, const int *action,
                            const int *nargs, const u64 *args, int *added);
ENG_API int eng_table_default(engine_t *E, int tid, int action, const u64 *args, int nargs);
ENG_API u64 *eng_entry_counters(engine_t *E, int handle);
ENG_API double *eng_entry_last_hit(engine_t *E, int handle);

/* action profiles and selectors (tables.c): members and groups by a handle the caller chooses (set: create or
 * replace; a group's members are member handles), and the member or group an entry names */
ENG_API int eng_member_set(engine_t *E, int handle, int action, const u64 *args, int nargs);
ENG_API void eng_member_delete(engine_t *E, int handle);
ENG_API int eng_group_set(engine_t *E, int handle, const int *members, int n);
ENG_API void eng_group_delete(engine_t *E, int handle);
ENG_API void eng_entry_names(engine_t *E, int handle, int member, int group);

/* registers, counters, meters, replication (externs.c) */
ENG_API u64 *eng_register(engine_t *E, int rid);
ENG_API u64 *eng_counter(engine_t *E, int cid, int bytes);
ENG_API void eng_meter_set(engine_t *E, int mid, u64 index, int on, double cir, double cburst, double pir,
                           double pburst);
ENG_API void eng_direct_meter_set(engine_t *E, int handle, int on, double cir, double cburst, double pir,
                                  double pburst);
ENG_API int eng_mc_set(engine_t *E, int gid, int n, const u32 *ports, const u32 *rids);
ENG_API int eng_clone_set(engine_t *E, u64 sid, int n, const u32 *ports, const u32 *rids, u32 pktlen);

/* one packet through the pipeline with empty queues (flow.c) */
ENG_API int eng_process(engine_t *E, u32 port, const u8 *data, u32 len);
ENG_API const u8 *eng_output(engine_t *E, int i, u32 *port, u32 *len);
ENG_API void eng_clear_outputs(engine_t *E);

/* events for Python: PacketIns, log lines, digests (events.c) */
ENG_API int eng_event(engine_t *E, int *arg, u8 *buf, u32 cap, u32 *len);
ENG_API int eng_event_fd(engine_t *E);
ENG_API void eng_event_wake(engine_t *E);

/* ports and the packet loop (ports.c, loop.c) */
ENG_API int eng_port_add(engine_t *E, int number, int fd, const char *pcap_in, const char *pcap_out);
ENG_API void eng_port_stats(engine_t *E, int number, u64 *out);
ENG_API void eng_set_cpu_port(engine_t *E, int port);
ENG_API void eng_set_pcap_cap(engine_t *E, u64 bytes);  /* most bytes per pcap file, 0: no cap */
/* BMv2's event log: `send` is libnanomsg's nn_send, `sock` a bound PUB socket; packets are numbered from first_id */
ENG_API void eng_set_event_log(engine_t *E, void *send, int sock, u64 device_id, u64 first_id);
ENG_API u64 eng_event_log_next_id(engine_t *E);
ENG_API int eng_run(engine_t *E);
ENG_API void eng_ports_release(engine_t *E);
ENG_API void eng_stop(engine_t *E);
ENG_API int eng_inject(engine_t *E, u32 port, const u8 *data, u32 len, u32 max_frames, u64 max_bytes);

/* the traffic manager (tm.c) */
ENG_API void eng_q_rate(engine_t *E, int port, int bits, double rate);
ENG_API void eng_q_depth(engine_t *E, int port, u32 depth);
ENG_API void eng_q_delay(engine_t *E, int port, double s);
ENG_API void eng_q_ingress_delay(engine_t *E, int port, double s);
ENG_API void eng_q_loss(engine_t *E, int port, double p, const u32 *key, int nkey);
ENG_API void eng_q_stats(engine_t *E, int port, u64 *out);

#endif
