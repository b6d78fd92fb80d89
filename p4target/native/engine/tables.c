/* tables.c: match-action tables (hashed levels for exact/lpm keys, a priority scan otherwise). */
#include "internal.h"

static u64 hash_key(const u64 *k, const u64 *mask, int n) {
    u64 h = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < n; i++) {
        u64 x = (k[i] & mask[i]) + h;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
        h = x ^ (x >> 31);
    }
    return h;
}

/* a vs b as n-word numbers, least significant word first: <0, 0 or >0 */
static int words_cmp(const u64 *a, const u64 *b, int n) {
    for (int i = n - 1; i >= 0; i--)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

entry_t *table_lookup(table_t *t, const u64 *key) {
    int n = t->nkeys;
    if (t->prio_mode) {
        for (u32 s = 0; s < t->nsorted; s++) {
            entry_t *e = t->sorted[s];
            int ok = 1;
            for (int i = 0; i < n && ok; i++) {
                if (e->kind[i] == 1) ok = (key[i] & e->m[i]) == e->v[i];
                else if (e->kind[i] == 2) ok = e->v[i] <= key[i] && key[i] <= e->hi[i];
                else if (e->kind[i] == 3) {  /* a range key wider than 64 bits: words 3, ..., 3, 2 as one number */
                    int w = 1;
                    while (e->kind[i + w - 1] == 3) w++;
                    ok = words_cmp(e->v + i, key + i, w) <= 0 && words_cmp(key + i, e->hi + i, w) <= 0;
                    i += w - 1;
                }
            }
            if (ok) return e;
        }
        return NULL;
    }
    for (level_t *l = t->levels; l; l = l->next) {
        u64 h = hash_key(key, l->mask, n);
        for (entry_t *e = l->b[h & (l->nb - 1)]; e; e = e->hnext) {
            int ok = 1;
            for (int i = 0; i < n && ok; i++) ok = (key[i] & l->mask[i]) == e->v[i];
            if (ok) return e;
        }
    }
    return NULL;
}

/* A bigger array for *arr (cap elements of size each, doubled or `first`): 0, or -1 with *arr unchanged. */
static int grow(void **arr, u32 *cap, size_t size, u32 first) {
    u32 n = *cap ? *cap * 2 : first;
    void *bigger = realloc(*arr, size * n);
    if (!bigger) return -1;
    *arr = bigger;
    *cap = n;
    return 0;
}

static void level_insert(level_t *l, entry_t *e, int n) {
    u32 nb = l->nb * 2;
    entry_t **b = l->n + 1 > l->nb ? calloc(nb, sizeof(entry_t *)) : NULL;
    if (b) {  /* rehashed into twice the buckets (without memory, the chains just grow longer) */
        for (u32 i = 0; i < l->nb; i++) {
            for (entry_t *x = l->b[i], *next; x; x = next) {
                next = x->hnext;
                u64 h = hash_key(x->v, l->mask, n) & (nb - 1);
                x->hnext = b[h]; b[h] = x;
            }
        }
        free(l->b); l->b = b; l->nb = nb;
    }
    u64 h = hash_key(e->v, l->mask, n) & (l->nb - 1);
    e->hnext = l->b[h]; l->b[h] = e;
    e->lvl = l;
    l->n++;
}

static void level_free(level_t *l) {
    if (l) { free(l->b); free(l->mask); }
    free(l);
}

/* The level of prefix length plen (created, NULL without memory). */
static level_t *level_for(table_t *t, int plen, const u64 *mask) {
    level_t **pp = &t->levels;
    while (*pp && (*pp)->plen > plen) pp = &(*pp)->next;
    if (*pp && (*pp)->plen == plen) return *pp;
    level_t *l = calloc(1, sizeof(level_t));
    if (l) {
        l->mask = malloc(sizeof(u64) * (t->nkeys ? (size_t)t->nkeys : 1));
        l->nb = 16;
        l->b = calloc(l->nb, sizeof(entry_t *));
    }
    if (!l || !l->mask || !l->b) { level_free(l); return NULL; }
    l->plen = plen;
    memcpy(l->mask, mask, sizeof(u64) * (size_t)t->nkeys);
    l->next = *pp;
    *pp = l;
    return l;
}

void eng_table_setup(engine_t *E, int tid, int lpm, int lpm_width, int prio_mode) {
    table_t *t = &E->st.tables[tid];
    t->lpm = lpm; t->lpm_width = lpm_width; t->prio_mode = prio_mode;
}

/* A new entry (not yet in any table): NULL without memory. */
static entry_t *entry_new(int n, const u64 *v, const u64 *m, const u64 *hi, const u8 *kind, int64_t prio,
                          int action, const u64 *args, int nargs) {
    entry_t *e = calloc(1, sizeof(entry_t) + sizeof(u64) * (size_t)(nargs + 3 * n) + (size_t)n + 8);
    if (!e) return NULL;
    e->args = (u64 *)(e + 1);
    e->v = e->args + nargs; e->m = e->v + n; e->hi = e->m + n;
    e->kind = (u8 *)(e->hi + n);
    memcpy(e->args, args, sizeof(u64) * (size_t)nargs);
    memcpy(e->v, v, sizeof(u64) * (size_t)n); memcpy(e->m, m, sizeof(u64) * (size_t)n);
    memcpy(e->hi, hi, sizeof(u64) * (size_t)n); memcpy(e->kind, kind, (size_t)n);
    e->action = action; e->prio = prio; e->capargs = (u32)nargs;
    e->member = e->group = -1;
    e->last_hit = mono();  /* as if hit when added: its idle timeout counts from now */
    return e;
}

/* Room for `handles` new handles and `sorted` more sorted entries: 0, or -1 (what grew stays grown). */
static int room_for(engine_t *E, table_t *t, u32 handles, u32 sorted) {
    while (E->nhandles + handles > E->caphandles) {
        u32 cap = E->caphandles;
        if (grow((void **)&E->freeh, &cap, sizeof(int32_t), 256)
            || grow((void **)&E->handles, &E->caphandles, sizeof(entry_t *), 256)) return -1;
    }
    while (t->nsorted + sorted > t->capsorted)
        if (grow((void **)&t->sorted, &t->capsorted, sizeof(entry_t *), 16)) return -1;
    return 0;
}

/* The level an entry of an exact/lpm table goes in (created, NULL without memory). */
static level_t *level_of(table_t *t, const entry_t *e) {
    int n = t->nkeys;
    u64 mask[n ? n : 1];
    for (int i = 0; i < n; i++) mask[i] = e->kind[i] == 1 ? e->m[i] : 0;
    int plen = 0;  /* the lpm key's prefix length, over its words (one per 64 bits) */
    for (int i = t->lpm; i >= 0 && i < t->lpm + (t->lpm_width + 63) / 64 && i < n; i++)
        plen += e->kind[i] == 1 ? __builtin_popcountll(e->m[i]) : 0;
    return level_for(t, plen, mask);
}

/* Put a new entry in its table (level `l`, or the sorted list), room made before: its handle. */
static int entry_place(engine_t *E, table_t *t, entry_t *e, level_t *l) {
    e->seq = t->seq++;
    if (l) {
        level_insert(l, e, t->nkeys);
    } else {
        u32 at = t->nsorted;
        while (at > 0 && t->sorted[at - 1]->prio < e->prio) at--;
        memmove(&t->sorted[at + 1], &t->sorted[at], sizeof(entry_t *) * (t->nsorted - at));
        t->sorted[at] = e;
        t->nsorted++;
    }
    e->handle = E->nfree ? E->freeh[--E->nfree] : (int32_t)E->nhandles++;
    E->handles[e->handle] = e;
    return e->handle;
}

int eng_table_add(engine_t *E, int tid, const u64 *v, const u64 *m, const u64 *hi, const u8 *kind,
                  int64_t prio, int action, const u64 *args, int nargs) {
    table_t *t = &E->st.tables[tid];
    entry_t *e = entry_new(t->nkeys, v, m, hi, kind, prio, action, args, nargs);
    if (!e) return -1;
    /* room first (a handle, a place in the table), so running out of memory leaves the table as it was */
    level_t *l = NULL;
    if (room_for(E, t, !E->nfree, 0) || (t->prio_mode ? room_for(E, t, 0, 1) : !(l = level_of(t, e)))) {
        free(e);
        return -1;
    }
    return entry_place(E, t, e, l);
}

/* A new action for an entry; `more`: a block for its arguments, when it has too little room for them. */
static void entry_set_action(entry_t *e, int action, const u64 *args, int nargs, u64 *more) {
    if (more) {
        free(e->own_args);
        e->args = e->own_args = more;
        e->capargs = (u32)nargs;
    }
    e->action = action;
    memcpy(e->args, args, sizeof(u64) * (size_t)nargs);
}

/* A new action for an entry: 0, or -1 without memory (the entry as it was). An action with more parameters than
 * the entry was made with gets a block of its own: writing them in place would run over the entry's key. */
int eng_table_modify(engine_t *E, int handle, int action, const u64 *args, int nargs) {
    entry_t *e = E->handles[handle];
    u64 *more = NULL;
    if ((u32)nargs > e->capargs && !(more = malloc(sizeof(u64) * (size_t)nargs))) return -1;
    entry_set_action(e, action, args, nargs, more);
    return 0;
}

void entry_free(entry_t *e) {
    if (e) free(e->own_args);
    free(e);
}

static void drop_empty_levels(table_t *t) {
    for (level_t **pl = &t->levels; *pl;) {
        level_t *l = *pl;
        if (l->n) {
            pl = &l->next;
        } else {
            *pl = l->next;
            level_free(l);
        }
    }
}

/* Take an entry out of its table and free it; its level stays when it empties unless `drop_level`. */
static void entry_remove(engine_t *E, table_t *t, entry_t *e, int drop_level) {
    if (t->prio_mode) {
        for (u32 s = 0; s < t->nsorted; s++) {
            if (t->sorted[s] == e) {
                memmove(&t->sorted[s], &t->sorted[s + 1], sizeof(entry_t *) * (t->nsorted - s - 1));
                t->nsorted--;
                break;
            }
        }
    } else {
        level_t *l = e->lvl;
        u64 h = hash_key(e->v, l->mask, t->nkeys) & (l->nb - 1);
        for (entry_t **pp = &l->b[h]; *pp; pp = &(*pp)->hnext) {
            if (*pp == e) { *pp = e->hnext; break; }
        }
        if (--l->n == 0 && drop_level) drop_empty_levels(t);
    }
    E->handles[e->handle] = NULL;
    E->freeh[E->nfree++] = e->handle;
    entry_free(e);
}

void eng_table_delete(engine_t *E, int tid, int handle) {
    entry_remove(E, &E->st.tables[tid], E->handles[handle], 1);
}

/* The entry a batch's op names: handle h, or -(j + 1) for the one op j added. */
static entry_t *batch_entry(engine_t *E, int h, const int *added) {
    return E->handles[h < 0 ? added[-h - 1] : h];
}

int eng_table_batch(engine_t *E, int tid, int n, const u8 *op, const int *handle, const u64 *v, const u64 *m,
                    const u64 *hi, const u8 *kind, const int64_t *prio, const int *action, const int *nargs,
                    const u64 *args, int *added) {
    table_t *t = &E->st.tables[tid];
    int nk = t->nkeys;
    u32 nadd = 0;
    for (int i = 0; i < n; i++) nadd += op[i] == 0;
    /* everything the ops need allocated first: the new entries (in their levels), bigger argument blocks */
    entry_t **made = calloc(n ? (size_t)n : 1, sizeof(entry_t *));
    u64 **more = calloc(n ? (size_t)n : 1, sizeof(u64 *));
    int fail = !made || !more || room_for(E, t, nadd, t->prio_mode ? nadd : 0);
    const u64 *a = args;
    for (int i = 0, k = 0; i < n && !fail; a += op[i] == 2 ? 0 : nargs[i], i++) {
        if (op[i] == 0) {
            size_t at = (size_t)k * (size_t)nk;
            entry_t *e = made[i] = entry_new(nk, v + at, m + at, hi + at, kind + at, prio[k], action[i], a, nargs[i]);
            fail = !e || (!t->prio_mode && !(e->lvl = level_of(t, e)));
            k++;
        } else if (op[i] == 1) {
            entry_t *e = handle[i] < 0 ? made[-handle[i] - 1] : E->handles[handle[i]];
            fail = (u32)nargs[i] > e->capargs && !(more[i] = malloc(sizeof(u64) * (size_t)nargs[i]));
        }
    }
    if (!fail) {
        a = args;
        for (int i = 0; i < n; a += op[i] == 2 ? 0 : nargs[i], i++) {
            added[i] = -1;
            if (op[i] == 0) {
                added[i] = entry_place(E, t, made[i], made[i]->lvl);
                made[i] = NULL;
            } else if (op[i] == 1) {
                entry_t *e = batch_entry(E, handle[i], added);
                if (more[i] && (u32)nargs[i] <= e->capargs) {  /* an earlier op in the batch gave it the room */
                    free(more[i]);
                    more[i] = NULL;
                }
                entry_set_action(e, action[i], a, nargs[i], more[i]);
                more[i] = NULL;
            } else {
                entry_remove(E, t, batch_entry(E, handle[i], added), 0);
            }
        }
    }
    for (int i = 0; i < n && made && more; i++) {  /* after a failure: what was allocated for the ops */
        free(made[i]);
        free(more[i]);
    }
    drop_empty_levels(t);
    free(made);
    free(more);
    return fail ? -1 : 0;
}

int eng_table_default(engine_t *E, int tid, int action, const u64 *args, int nargs) {
    table_t *t = &E->st.tables[tid];
    u64 *copy = calloc(nargs ? (size_t)nargs : 1, sizeof(u64));
    if (!copy) return -1;
    memcpy(copy, args, sizeof(u64) * (size_t)nargs);
    free(t->def_args);
    t->def_args = copy;
    t->def_action = action;
    return 0;
}

/* Put obj at (*arr)[handle], grown (zeroed) to hold it, freeing what was there: 0, or -1 with nothing changed. */
static int put_handle(void ***arr, u32 *cap, int handle, void *obj) {
    if ((u32)handle >= *cap) {
        u32 n = *cap ? *cap : 16;
        while (n <= (u32)handle) n *= 2;
        void **bigger = realloc(*arr, sizeof(void *) * n);
        if (!bigger) return -1;
        memset(bigger + *cap, 0, sizeof(void *) * (n - *cap));
        *arr = bigger;
        *cap = n;
    }
    free((*arr)[handle]);
    (*arr)[handle] = obj;
    return 0;
}

int eng_member_set(engine_t *E, int handle, int action, const u64 *args, int nargs) {
    member_t *m = malloc(sizeof(member_t) + sizeof(u64) * (size_t)nargs);
    if (!m) return -1;
    m->action = action;
    m->nargs = (u32)nargs;
    memcpy(m->args, args, sizeof(u64) * (size_t)nargs);
    if (put_handle((void ***)&E->st.members, &E->capmembers, handle, m)) { free(m); return -1; }
    return 0;
}

void eng_member_delete(engine_t *E, int handle) { put_handle((void ***)&E->st.members, &E->capmembers, handle, NULL); }

int eng_group_set(engine_t *E, int handle, const int *members, int n) {
    group_t *g = malloc(sizeof(group_t) + sizeof(int) * (size_t)n);
    if (!g) return -1;
    g->n = (u32)n;
    memcpy(g->m, members, sizeof(int) * (size_t)n);
    if (put_handle((void ***)&E->st.groups, &E->capgroups, handle, g)) { free(g); return -1; }
    return 0;
}

void eng_group_delete(engine_t *E, int handle) { put_handle((void ***)&E->st.groups, &E->capgroups, handle, NULL); }

void eng_entry_names(engine_t *E, int handle, int member, int group) {
    E->handles[handle]->member = member;
    E->handles[handle]->group = group;
}

void profiles_free(engine_t *E) {
    for (u32 h = 0; h < E->capmembers; h++) free(E->st.members[h]);
    for (u32 h = 0; h < E->capgroups; h++) free(E->st.groups[h]);
    free(E->st.members); free(E->st.groups);
}

u64 *eng_entry_counters(engine_t *E, int handle) { return &E->handles[handle]->packets; }
double *eng_entry_last_hit(engine_t *E, int handle) { return &E->handles[handle]->last_hit; }

void table_free(table_t *t) {
    for (level_t *l = t->levels, *next; l; l = next) { next = l->next; level_free(l); }
    free(t->sorted); free(t->def_args);
}
