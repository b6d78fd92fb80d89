/* driver.c: replay a Trace (p4target/native/binding.py) into the engine and the program it is linked with, then
 * fuzz it: random, truncated, mutated and extended frames built from the trace's packets, through eng_process.
 * Built with AddressSanitizer and UndefinedBehaviorSanitizer (build.build_sanitized), which abort on the first
 * error; see p4target/native/fuzz/__init__.py.
 *
 *   driver TRACE FRAMES SEED  ->  one line of counts on stdout; exit 1 if the replay's outputs differ from the
 *                                 trace's (2: a bad trace) */
#include "api.h"

#define MAX_FRAME (64 * 1024 + 1024)  /* a frame up to 64 KiB and some: a PacketOut of 64 KiB with its header */
#define MAX_SEEDS 4096

static u64 rng_state;
static u64 rnd(void) {  /* xorshift64*, the run's only randomness: a seed replays a run exactly */
    rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

typedef struct { u32 port, len; u8 *data; } frame_t;
static frame_t seeds[MAX_SEEDS];
static int nseeds;
static u8 event_buf[1 << 17];

static char *cur;  /* the rest of the line being read */
static int line_no;

static void bad(const char *what) {
    fprintf(stderr, "trace line %d: %s\n", line_no, what);
    exit(2);
}

static char *token(void) {
    char *t = strtok_r(NULL, " \n", &cur);
    if (!t) bad("missing value");
    return t;
}

static u64 num(void) { return strtoull(token(), NULL, 10); }
static double real(void) { return strtod(token(), NULL); }

/* An array (its length, then values) into a new buffer; its length in *n. */
static u64 *array(u32 *n) {
    *n = (u32)num();
    u64 *a = calloc(*n ? *n : 1, sizeof(u64));
    if (!a) bad("out of memory");
    for (u32 i = 0; i < *n; i++) a[i] = num();
    return a;
}

static u32 *array32(u32 *n) {
    u64 *a = array(n);
    u32 *b = calloc(*n ? *n : 1, sizeof(u32));
    if (!b) bad("out of memory");
    for (u32 i = 0; i < *n; i++) b[i] = (u32)a[i];
    free(a);
    return b;
}

/* Bytes (their length, then hex or '-') into buf. */
static u32 bytes(u8 *buf, u32 cap) {
    u32 n = (u32)num();
    const char *hex = token();
    if (n > cap || (n && strlen(hex) != 2 * (size_t)n)) bad("bad bytes");
    for (u32 i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) bad("bad hex");
        buf[i] = (u8)v;
    }
    return n;
}

static void drain(engine_t *E) {
    int arg;
    u32 len;
    while (eng_event(E, &arg, event_buf, sizeof(event_buf), &len)) {}
}

static int process(engine_t *E, u32 port, const u8 *data, u32 len) {
    int n = eng_process(E, port, data, len);
    drain(E);
    return n;
}

/* The trace, replayed: how many packets' outputs differ from those recorded. */
static int replay(engine_t *E, FILE *f, int *packets) {
    static char line[4 * MAX_FRAME + 256];
    static u8 buf[MAX_FRAME];
    int differ = 0, outs = 0, seen = 0, wrong = 0;
    while (fgets(line, sizeof(line), f)) {
        line_no++;
        char *cmd = strtok_r(line, " \n", &cur);
        if (!cmd) continue;
        if (!strcmp(cmd, "out")) {
            u32 port = (u32)num(), len = bytes(buf, MAX_FRAME), gport, glen;
            const u8 *got = seen < outs ? eng_output(E, seen, &gport, &glen) : NULL;
            wrong |= !got || gport != port || glen != len || memcmp(got, buf, len);
            seen++;
            continue;
        }
        differ += wrong || seen != outs;
        wrong = seen = outs = 0;
        if (!strcmp(cmd, "process")) {
            u32 port = (u32)num(), len = bytes(buf, MAX_FRAME);
            (void)num();  /* the length again */
            outs = process(E, port, buf, len);
            (*packets)++;
            if (nseeds < MAX_SEEDS) {
                u8 *copy = malloc(len ? len : 1);
                if (!copy) bad("out of memory");
                memcpy(copy, buf, len);
                seeds[nseeds++] = (frame_t){port, len, copy};
            }
        } else if (!strcmp(cmd, "table_setup")) {
            int tid = (int)num(), lpm = (int)num(), w = (int)num();
            eng_table_setup(E, tid, lpm, w, (int)num());
        } else if (!strcmp(cmd, "table_add")) {
            u32 n, nargs;
            int tid = (int)num();
            u64 *v = array(&n), *m = array(&n), *hi = array(&n), *k = array(&n);
            u8 kind[n ? n : 1];
            for (u32 i = 0; i < n; i++) kind[i] = (u8)k[i];
            int64_t prio = (int64_t)num();
            int action = (int)num();
            u64 *args = array(&nargs);
            if (eng_table_add(E, tid, v, m, hi, kind, prio, action, args, (int)num()) < 0) bad("table_add failed");
            free(v); free(m); free(hi); free(k); free(args);
        } else if (!strcmp(cmd, "table_modify")) {
            u32 nargs;
            int handle = (int)num(), action = (int)num();
            u64 *args = array(&nargs);
            if (eng_table_modify(E, handle, action, args, (int)num())) bad("table_modify failed");
            free(args);
        } else if (!strcmp(cmd, "table_delete")) {
            int tid = (int)num();
            eng_table_delete(E, tid, (int)num());
        } else if (!strcmp(cmd, "table_batch")) {  /* each array as recorded; `added` refilled by the call */
            u32 nop, nh, nv, nm, nhi, nk, np, na, nn, nargs, nadded;
            int tid = (int)num(), n = (int)num();
            u64 *op = array(&nop), *h = array(&nh), *v = array(&nv), *m = array(&nm), *hi = array(&nhi);
            u64 *k = array(&nk), *p = array(&np), *a = array(&na), *na_ = array(&nn), *args = array(&nargs);
            u64 *was = array(&nadded);
            u8 ops[nop ? nop : 1], kind[nk ? nk : 1];
            int handle[nh ? nh : 1], action[na ? na : 1], nargsv[nn ? nn : 1], added[nadded ? nadded : 1];
            int64_t prio[np ? np : 1];
            for (u32 i = 0; i < nop; i++) ops[i] = (u8)op[i];
            for (u32 i = 0; i < nk; i++) kind[i] = (u8)k[i];
            for (u32 i = 0; i < nh; i++) handle[i] = (int)h[i];
            for (u32 i = 0; i < na; i++) action[i] = (int)a[i];
            for (u32 i = 0; i < nn; i++) nargsv[i] = (int)na_[i];
            for (u32 i = 0; i < np; i++) prio[i] = (int64_t)p[i];
            if (eng_table_batch(E, tid, n, ops, handle, v, m, hi, kind, prio, action, nargsv, args, added))
                bad("table_batch failed");
            for (int i = 0; i < n; i++)
                if ((u64)(int64_t)added[i] != was[i]) bad("table_batch: not the recorded handles");
            free(op); free(h); free(v); free(m); free(hi); free(k); free(p); free(a); free(na_); free(args);
            free(was);
        } else if (!strcmp(cmd, "table_default")) {
            u32 nargs;
            int tid = (int)num(), action = (int)num();
            u64 *args = array(&nargs);
            if (eng_table_default(E, tid, action, args, (int)num())) bad("table_default failed");
            free(args);
        } else if (!strcmp(cmd, "meter_set")) {
            int mid = (int)num();
            u64 index = num();
            int on = (int)num();
            double cir = real(), cburst = real(), pir = real();
            eng_meter_set(E, mid, index, on, cir, cburst, pir, real());
        } else if (!strcmp(cmd, "direct_meter_set")) {
            int handle = (int)num(), on = (int)num();
            double cir = real(), cburst = real(), pir = real();
            eng_direct_meter_set(E, handle, on, cir, cburst, pir, real());
        } else if (!strcmp(cmd, "mc_set") || !strcmp(cmd, "clone_set")) {
            int mc = cmd[0] == 'm';
            u64 id = num();
            int n = (int)(int64_t)num();
            u32 np, nr;
            u32 *ports = array32(&np), *rids = array32(&nr);
            if (mc ? eng_mc_set(E, (int)id, n, ports, rids) : eng_clone_set(E, id, n, ports, rids, (u32)num()))
                bad("mc_set/clone_set failed");
            free(ports); free(rids);
        } else if (!strcmp(cmd, "member_set")) {
            u32 nargs;
            int handle = (int)num(), action = (int)num();
            u64 *args = array(&nargs);
            if (eng_member_set(E, handle, action, args, (int)num())) bad("member_set failed");
            free(args);
        } else if (!strcmp(cmd, "group_set")) {
            u32 n;
            int handle = (int)num();
            u32 *members = array32(&n);
            if (eng_group_set(E, handle, (const int *)members, (int)num())) bad("group_set failed");
            free(members);
        } else if (!strcmp(cmd, "member_delete") || !strcmp(cmd, "group_delete")) {
            (cmd[0] == 'm' ? eng_member_delete : eng_group_delete)(E, (int)num());
        } else if (!strcmp(cmd, "entry_names")) {
            int handle = (int)num(), member = (int)num();
            eng_entry_names(E, handle, member, (int)num());
        } else if (!strcmp(cmd, "set_cpu_port")) {
            eng_set_cpu_port(E, (int)num());
        } else if (!strcmp(cmd, "reg")) {
            int rid = (int)num();
            u64 index = num();
            eng_register(E, rid)[index] = num();
        } else {
            bad("unknown command");
        }
    }
    return differ + (wrong || seen != outs);
}

/* One fuzzed frame into buf: its length; its port in *port; the kind of fuzzing in *kind. */
static u32 fuzz_frame(u8 *buf, u32 *port, int *kind) {
    static const u8 special[] = {0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff};
    const frame_t *s = nseeds ? &seeds[rnd() % (u64)nseeds] : NULL;
    *kind = s ? (int)(rnd() % 4) : 0;
    *port = s && rnd() % 8 ? s->port : (u32)(rnd() % 512);
    u32 len;
    if (*kind == 0) {  /* random bytes, mostly short */
        len = (u32)(rnd() % (rnd() % 4 ? 128 : 1600));
        for (u32 i = 0; i < len; i++) buf[i] = (u8)rnd();
        return len;
    }
    len = s->len;
    memcpy(buf, s->data, len);
    if (*kind == 1) return (u32)(rnd() % (len + 1));  /* truncated */
    if (*kind == 2 && len) {  /* a few bytes or bits changed */
        for (int k = 0, n = 1 + (int)(rnd() % 8); k < n; k++) {
            u32 at = (u32)(rnd() % len);
            switch (rnd() % 3) {
            case 0: buf[at] ^= (u8)(1u << (rnd() % 8)); break;
            case 1: buf[at] = (u8)rnd(); break;
            default: buf[at] = special[rnd() % sizeof(special)]; break;
            }
        }
        return rnd() % 4 ? len : (u32)(rnd() % (len + 1));
    }
    /* extended: random bytes, or another seed's bytes, after it */
    const frame_t *t = &seeds[rnd() % (u64)nseeds];
    u32 more = (u32)(rnd() % 256);
    if (len + more > MAX_FRAME) more = MAX_FRAME - len;
    for (u32 i = 0; i < more; i++) buf[len + i] = rnd() % 2 && i < t->len ? t->data[i] : (u8)rnd();
    return len + more;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s TRACE FRAMES SEED\n", argv[0]); return 2; }
    FILE *f = fopen(argv[1], "r");
    if (!f) { perror(argv[1]); return 2; }
    u64 frames = strtoull(argv[2], NULL, 10);
    rng_state = strtoull(argv[3], NULL, 10) * 0x9E3779B97F4A7C15ULL + 1;
    engine_t *E = eng_new(0);
    if (!E) { fprintf(stderr, "cannot create the engine\n"); return 2; }
    int packets = 0;
    int differ = replay(E, f, &packets);
    fclose(f);
    static u8 buf[MAX_FRAME];
    u64 kinds[4] = {0}, outputs = 0;
    for (u64 i = 0; i < frames; i++) {
        u32 port;
        int kind;
        u32 len = fuzz_frame(buf, &port, &kind);
        kinds[kind]++;
        outputs += (u64)process(E, port, buf, len);
    }
    printf("replayed %d packets (%d with outputs differing from the trace); fuzzed %llu frames: %llu random, "
           "%llu truncated, %llu mutated, %llu extended; %llu outputs; %llu pipeline errors\n", packets, differ,
           (unsigned long long)frames, (unsigned long long)kinds[0], (unsigned long long)kinds[1],
           (unsigned long long)kinds[2], (unsigned long long)kinds[3], (unsigned long long)outputs,
           (unsigned long long)eng_pipeline_errors(E));
    eng_clear_outputs(E);
    for (int i = 0; i < nseeds; i++) free(seeds[i].data);
    eng_free(E);
    return differ ? 1 : 0;
}
