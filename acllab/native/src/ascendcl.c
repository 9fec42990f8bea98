/* acllab's libascendcl.so: AscendCL for C and C++ programs, on acllab's simulated device.
 *
 * Each AscendCL function sends its pyACL twin's call (acl.rt.malloc for aclrtMalloc, ...) to
 * a device server over acllab's device protocol (docs/device-protocol.md) and returns the
 * code pyACL returns. The rules of the simulation live only in the server; this file speaks
 * the wire format, keeps host memory in step, and gives each thread of the program its own
 * channel (so its own current context, as in CANN).
 *
 * The device: the server named by ACLLAB_DEVICE (a Unix socket path; `acllab profile` sets
 * it), or else one this library starts for the program (`python -m acllab.native.serve`
 * over a socket pair) the first time the program calls AscendCL.
 *
 * Host memory:
 *  - pinned buffers (aclrtMallocHost) are the shared arena the server sends at the handshake:
 *    the program gets a real pointer into it, and the device reads and writes the same bytes;
 *  - any other host pointer a copy names (a stack or malloc buffer) is registered with the
 *    server (op host.register, pyACL's bytes_to_ptr) the first time, and every message then
 *    carries the bytes of the registered buffers that changed since the last one, as the
 *    protocol's "mem" field says; the server's messages carry what the device wrote there;
 *  - device pointers are the simulator's addresses, which map nothing in this process:
 *    writing through one faults, as on a card.
 *
 * Written for acllab; no code of Huawei's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_op_compiler.h"
#include "acl/ops/acl_dvpp.h"

#ifndef ACLLAB_PYTHON
#define ACLLAB_PYTHON "python3"
#endif
#ifndef ACLLAB_PYTHONPATH
#define ACLLAB_PYTHONPATH ""
#endif

#define PROTOCOL_VERSION 1
#define MAX_FRAME (256u << 20)
#define MAX_DEPTH 48
#define MAX_PAGEABLE 64                   /* registered host buffers kept in step at once */
#define LABEL "host buffer"

/* ------------------------------------------------------------------------------------------
 * values (the wire format's, decoded)
 * ---------------------------------------------------------------------------------------- */

typedef struct V {
    char t;               /* the tag: N T F i I d s b l t m x a */
    int64_t i;            /* i (and I when it fits) */
    double d;
    uint32_t n;           /* s/b: bytes; l/t: items; m: pairs */
    char *s;              /* s/b bytes (NUL-terminated), x: the extension's name */
    struct V **a;         /* l/t: n items; m: 2n (key, value); x: 1 */
} V;

static void vfree(V *v) {
    if (!v) return;
    uint32_t k = v->t == 'm' ? 2 * v->n : (v->t == 'x' ? 1 : v->n);
    if (v->a) {
        for (uint32_t j = 0; j < k; j++) vfree(v->a[j]);
        free(v->a);
    }
    free(v->s);
    free(v);
}

typedef struct { const unsigned char *p; size_t n, pos; long items; } Rd;

static int take(Rd *r, size_t k, const unsigned char **out) {
    if (k > r->n - r->pos) return -1;
    *out = r->p + r->pos;
    r->pos += k;
    return 0;
}

static uint64_t be(const unsigned char *b, int k) {
    uint64_t x = 0;
    for (int j = 0; j < k; j++) x = (x << 8) | b[j];
    return x;
}

static V *dec(Rd *r, int depth) {
    const unsigned char *b;
    if (depth > MAX_DEPTH || ++r->items > (1 << 20) || take(r, 1, &b)) return NULL;
    V *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->t = (char)b[0];
    switch (v->t) {
    case 'N': case 'T': case 'F':
        return v;
    case 'i':
        if (take(r, 8, &b)) break;
        v->i = (int64_t)be(b, 8);
        return v;
    case 'I': {
        if (take(r, 2, &b)) break;
        size_t k = (size_t)be(b, 2);
        if (take(r, k, &b)) break;
        int64_t x = (k && (b[0] & 0x80)) ? -1 : 0;
        for (size_t j = 0; j < k; j++) x = (int64_t)(((uint64_t)x << 8) | b[j]);
        v->i = x;                     /* beyond 64 bits: the low 64 (addresses never are) */
        return v;
    }
    case 'd': {
        if (take(r, 8, &b)) break;
        uint64_t u = be(b, 8);
        memcpy(&v->d, &u, 8);
        return v;
    }
    case 's': case 'b': {
        if (take(r, 4, &b)) break;
        v->n = (uint32_t)be(b, 4);
        if (take(r, v->n, &b)) break;
        v->s = malloc((size_t)v->n + 1);
        if (!v->s) break;
        memcpy(v->s, b, v->n);
        v->s[v->n] = 0;
        return v;
    }
    case 'l': case 't': case 'm': {
        if (take(r, 4, &b)) break;
        v->n = (uint32_t)be(b, 4);
        size_t k = v->t == 'm' ? 2 * (size_t)v->n : v->n;
        if (k > r->n - r->pos) break;
        v->a = calloc(k ? k : 1, sizeof(V *));
        if (!v->a) break;
        for (size_t j = 0; j < k; j++)
            if (!(v->a[j] = dec(r, depth + 1))) { vfree(v); return NULL; }
        return v;
    }
    case 'x': {
        if (take(r, 1, &b)) break;
        size_t k = b[0];
        if (take(r, k, &b)) break;
        v->s = malloc(k + 1);
        if (!v->s) break;
        memcpy(v->s, b, k);
        v->s[k] = 0;
        v->a = calloc(1, sizeof(V *));
        if (!v->a || !(v->a[0] = dec(r, depth + 1))) { vfree(v); return NULL; }
        return v;
    }
    case 'a': {                        /* an array: kept as its raw bytes */
        if (take(r, 1, &b)) break;
        size_t k = b[0];
        if (take(r, k, &b) || take(r, 1, &b)) break;
        size_t nd = b[0];
        if (nd > 32 || take(r, 8 * nd, &b) || take(r, 8, &b)) break;
        uint64_t nb = be(b, 8);
        if (nb > r->n - r->pos || take(r, (size_t)nb, &b)) break;
        v->t = 'b';
        v->n = (uint32_t)nb;
        v->s = malloc((size_t)nb + 1);
        if (!v->s) break;
        memcpy(v->s, b, (size_t)nb);
        return v;
    }
    }
    free(v->a);
    free(v->s);
    free(v);
    return NULL;
}

static V *get(const V *m, const char *key) {
    if (!m || m->t != 'm') return NULL;
    for (uint32_t j = 0; j < m->n; j++) {
        V *k = m->a[2 * j];
        if (k->t == 's' && strcmp(k->s, key) == 0) return m->a[2 * j + 1];
    }
    return NULL;
}

static int is_seq(const V *v) { return v && (v->t == 'l' || v->t == 't'); }
static int is_int(const V *v) { return v && (v->t == 'i' || v->t == 'I'); }

/* ------------------------------------------------------------------------------------------
 * encoding
 * ---------------------------------------------------------------------------------------- */

typedef struct { unsigned char *p; size_t n, cap; int bad; } Buf;

static void put(Buf *b, const void *src, size_t k) {
    if (b->bad) return;
    if (b->n + k > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + k) cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) { b->bad = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, k);
    b->n += k;
}

static void put_be(Buf *b, uint64_t x, int k) {
    unsigned char t[8];
    for (int j = k - 1; j >= 0; j--) { t[j] = (unsigned char)(x & 0xFF); x >>= 8; }
    put(b, t, (size_t)k);
}

static void e_tag(Buf *b, char t) { put(b, &t, 1); }
static void e_none(Buf *b) { e_tag(b, 'N'); }
static void e_bool(Buf *b, int x) { e_tag(b, x ? 'T' : 'F'); }
static void e_int(Buf *b, int64_t x) { e_tag(b, 'i'); put_be(b, (uint64_t)x, 8); }
static void e_uint(Buf *b, uint64_t x) {
    if (x <= (uint64_t)INT64_MAX) { e_int(b, (int64_t)x); return; }
    e_tag(b, 'I');                     /* past int64: 9 bytes, two's complement, positive */
    put_be(b, 9, 2);
    unsigned char zero = 0;
    put(b, &zero, 1);
    put_be(b, x, 8);
}
static void e_double(Buf *b, double d) { uint64_t u; memcpy(&u, &d, 8); e_tag(b, 'd'); put_be(b, u, 8); }
static void e_str(Buf *b, const char *s) {
    size_t k = strlen(s);
    e_tag(b, 's');
    put_be(b, k, 4);
    put(b, s, k);
}
static void e_bytes(Buf *b, const void *p, size_t k) { e_tag(b, 'b'); put_be(b, k, 4); put(b, p, k); }
static void e_list(Buf *b, uint32_t k) { e_tag(b, 'l'); put_be(b, k, 4); }
static void e_map(Buf *b, uint32_t k) { e_tag(b, 'm'); put_be(b, k, 4); }

/* ------------------------------------------------------------------------------------------
 * the connection
 * ---------------------------------------------------------------------------------------- */

typedef struct Waiter {
    int64_t id;
    int ch;
    V *reply;
    V **queue;               /* the server's requests on this channel, for this waiter */
    int nq, capq;
    struct Waiter *next;
} Waiter;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char start_cwd[4096];      /* where the program started (the server's directory) */
static int sock = -1;
static int lost;                       /* the connection is gone: every call fails */
static int exiting;                    /* the program is exiting: a lost connection is quiet */
static char lost_why[1024];
static pid_t child;                    /* the device server this library started, if any */
static unsigned char *arena;
static size_t arena_size;
static int64_t next_id = 1;
static int next_ch = 1;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;   /* waiters, reading */
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t wmu = PTHREAD_MUTEX_INITIALIZER;  /* sending */
static pthread_mutex_t pmu = PTHREAD_MUTEX_INITIALIZER;  /* host memory tables */
static Waiter *waiters;
static int reading;

static __thread int my_ch = -1;
static __thread char *recent;          /* aclGetRecentErrMsg's answer */
static __thread char *local_err;       /* a failure found here, before any call was sent */

static void lose(const char *why) {
    if (!lost) {
        lost = 1;
        snprintf(lost_why, sizeof lost_why, "%s", why);
        if (!exiting)
            fprintf(stderr, "acllab libascendcl: the connection to the device was lost (%s); "
                        "every AscendCL call now fails with %d\n", why, ACL_ERROR_FAILURE);
    }
}

/* Channels given to threads by id before they called anything (aclrtSubscribeReport names
 * the report thread by its pthread_t): mu held. */
typedef struct { uint64_t tid; int ch; int polled; } Named;
static pthread_cond_t polled_cv = PTHREAD_COND_INITIALIZER;   /* a thread's first report poll */
static Named *named;
static int nnamed, capnamed;

static int named_channel(uint64_t tid, int make) {
    for (int j = 0; j < nnamed; j++)
        if (named[j].tid == tid) return named[j].ch;
    if (!make) return -1;
    if (nnamed == capnamed) {
        int cap = capnamed ? 2 * capnamed : 8;
        Named *p = realloc(named, (size_t)cap * sizeof(Named));
        if (!p) return -1;
        named = p;
        capnamed = cap;
    }
    named[nnamed].tid = tid;
    named[nnamed].polled = 0;
    named[nnamed].ch = next_ch++;
    return named[nnamed++].ch;
}

static int channel(void) {
    if (my_ch < 0) {
        int main_thread = (pid_t)syscall(SYS_gettid) == getpid();
        pthread_mutex_lock(&mu);
        if (main_thread) my_ch = 0;
        else my_ch = named_channel((uint64_t)pthread_self(), 1);
        pthread_mutex_unlock(&mu);
    }
    return my_ch;
}

/* The channel of the thread with id tid (this one's, or one it will have). */
static int channel_of(uint64_t tid) {
    if (tid == (uint64_t)pthread_self()) return channel();
    pthread_mutex_lock(&mu);
    int ch = named_channel(tid, 1);
    pthread_mutex_unlock(&mu);
    return ch;
}

/* -- host memory ------------------------------------------------------------------------ */

typedef struct { unsigned char *local; size_t size; uint64_t sim; } Pinned;
/* A registered host buffer: its bytes as the device last saw them (snap), and the channel
 * whose messages carry its changes (owner: the thread that last named it in a call). The
 * server applies a message's memory changes on that message's channel, in order with its
 * calls, so a buffer's changes travel on the channel of the thread that uses it. */
typedef struct {
    unsigned char *local; size_t size; uint64_t sim; unsigned char *snap; int owner;
} Pageable;

static Pinned *pinned;
static int npinned, cappinned;
static Pageable pageable[MAX_PAGEABLE];
static int npageable;
static uint64_t dead[MAX_PAGEABLE * 4];   /* buffers to report "dead" with the next message */
static int ndead;
static int vm_read_ok = 1;

/* Copy k bytes at local address p into out without faulting; 0 if they are not readable. */
static int safe_read(const void *p, void *out, size_t k) {
    if (k == 0) return 1;
    if (vm_read_ok) {
        struct iovec l = {out, k}, r = {(void *)p, k};
        ssize_t got = syscall(SYS_process_vm_readv, getpid(), &l, 1UL, &r, 1UL, 0UL);
        if (got == (ssize_t)k) return 1;
        if (got >= 0 || errno == EFAULT || errno == ESRCH) return 0;
        vm_read_ok = 0;                  /* not allowed here: fall back to a plain copy */
    }
    memcpy(out, p, k);
    return 1;
}

/* The mem list for the next message on channel ch: the buffers it owns that changed, and
 * the dead ones (pmu held). */
static uint32_t mem_items(Buf *b, int ch) {
    uint32_t count = 0;
    Buf tmp = {0};
    for (int j = 0; j < ndead; j++) {
        e_list(&tmp, 2); e_str(&tmp, "dead"); e_uint(&tmp, dead[j]);
        count++;
    }
    ndead = 0;
    for (int j = 0; j < npageable; j++) {
        Pageable *e = &pageable[j];
        if (e->owner != ch) continue;
        unsigned char *now = malloc(e->size ? e->size : 1);
        if (!now) continue;
        if (!safe_read(e->local, now, e->size)) {     /* unmapped since: the buffer died */
            free(now);
            e_list(&tmp, 2); e_str(&tmp, "dead"); e_uint(&tmp, e->sim);
            count++;
            free(e->snap);
            pageable[j--] = pageable[--npageable];
            continue;
        }
        if (memcmp(now, e->snap, e->size) != 0) {
            e_list(&tmp, 3); e_str(&tmp, "w"); e_uint(&tmp, e->sim); e_bytes(&tmp, now, e->size);
            count++;
            free(e->snap);
            e->snap = now;
        } else {
            free(now);
        }
    }
    if (count) {
        e_str(b, "mem");
        e_list(b, count);
        put(b, tmp.p, tmp.n);
    }
    free(tmp.p);
    return count;
}

/* What the device wrote into registered buffers (a message's mem list). */
static void apply_mem(const V *mem) {
    if (!is_seq(mem)) return;
    pthread_mutex_lock(&pmu);
    for (uint32_t j = 0; j < mem->n; j++) {
        /* ["wv", addr, [[offset, bytes]...]]: the bytes the device wrote since this library
         * last had the buffer, each write once (a message's "w" item, the whole copy, comes
         * again with every thread's messages and is for pyACL's client) */
        V *it = mem->a[j];
        if (!is_seq(it) || it->n != 3 || it->a[0]->t != 's' || strcmp(it->a[0]->s, "wv") != 0
            || !is_int(it->a[1]) || !is_seq(it->a[2]))
            continue;
        for (int k = 0; k < npageable; k++) {
            Pageable *e = &pageable[k];
            if (e->sim != (uint64_t)it->a[1]->i) continue;
            for (uint32_t r = 0; r < it->a[2]->n; r++) {
                const V *run = it->a[2]->a[r];
                if (!is_seq(run) || run->n != 2 || !is_int(run->a[0]) || run->a[1]->t != 'b')
                    continue;
                uint64_t off = (uint64_t)run->a[0]->i, n = run->a[1]->n;
                if (off > e->size || n > e->size - off) continue;
                memcpy(e->local + off, run->a[1]->s, n);      /* as the DMA into it would */
                memcpy(e->snap + off, run->a[1]->s, n);
            }
        }
    }
    pthread_mutex_unlock(&pmu);
}

/* -- frames ----------------------------------------------------------------------------- */

static int send_all(const unsigned char *p, size_t k) {
    while (k) {
        ssize_t w = send(sock, p, k, MSG_NOSIGNAL);
        if (w < 0) { if (errno == EINTR) continue; return -1; }
        p += w;
        k -= (size_t)w;
    }
    return 0;
}

static int recv_all(unsigned char *p, size_t k) {
    while (k) {
        ssize_t r = recv(sock, p, k, 0);
        if (r < 0) { if (errno == EINTR) continue; return -1; }
        if (r == 0) return -1;
        p += r;
        k -= (size_t)r;
    }
    return 0;
}

/* Send one message: the fields already encoded in body (nfields of them), plus mem. */
static int send_msg(const Buf *body, uint32_t nfields) {
    Buf mem = {0}, out = {0};
    int ch = channel();
    pthread_mutex_lock(&wmu);
    pthread_mutex_lock(&pmu);
    uint32_t has_mem = mem_items(&mem, ch) ? 1 : 0;
    pthread_mutex_unlock(&pmu);
    put_be(&out, 0, 4);
    e_map(&out, nfields + has_mem);
    put(&out, body->p, body->n);
    put(&out, mem.p, mem.n);
    int rc = -1;
    if (!out.bad && !mem.bad && !body->bad && out.n - 4 <= MAX_FRAME) {
        uint64_t k = out.n - 4;
        for (int j = 0; j < 4; j++) out.p[j] = (unsigned char)(k >> (8 * (3 - j)));
        rc = send_all(out.p, out.n);
        if (rc) lose("sending failed");
    } else {
        fprintf(stderr, "acllab libascendcl: a message too large for the device protocol\n");
    }
    pthread_mutex_unlock(&wmu);
    free(mem.p);
    free(out.p);
    return rc;
}

static V *read_msg(void) {
    unsigned char h[4];
    if (recv_all(h, 4)) return NULL;
    uint32_t k = (uint32_t)be(h, 4);
    if (k > MAX_FRAME) return NULL;
    unsigned char *body = malloc(k ? k : 1);
    if (!body) return NULL;
    if (recv_all(body, k)) { free(body); return NULL; }
    Rd r = {body, k, 0, 0};
    V *v = dec(&r, 0);
    if (v && r.pos != k) { vfree(v); v = NULL; }
    free(body);
    if (v && v->t != 'm') { vfree(v); v = NULL; }
    return v;
}

static void serve(V *req);
static const V *item(const V *v, uint32_t j);

/* Route one message read from the stream (mu held). */
static void route(V *msg) {
    V *k = get(msg, "k"), *ch = get(msg, "ch");
    int c = is_int(ch) ? (int)ch->i : 0;
    if (k && k->t == 's' && (strcmp(k->s, "r") == 0 || strcmp(k->s, "e") == 0)) {
        V *id = get(msg, "id");
        for (Waiter *w = waiters; w; w = w->next)
            if (is_int(id) && w->id == id->i) { w->reply = msg; return; }
        lose("a reply to no request");
        vfree(msg);
        return;
    }
    if (k && k->t == 's' && strcmp(k->s, "q") == 0) {
        for (Waiter *w = waiters; w; w = w->next) {          /* the newest waiter first */
            if (w->ch == c) {
                if (w->nq == w->capq) {
                    int cap = w->capq ? 2 * w->capq : 4;
                    V **q = realloc(w->queue, (size_t)cap * sizeof(V *));
                    if (!q) break;
                    w->queue = q;
                    w->capq = cap;
                }
                w->queue[w->nq++] = msg;
                return;
            }
        }
        /* nothing of this program waits on that channel: the request cannot be served */
        pthread_mutex_unlock(&mu);
        serve(msg);
        pthread_mutex_lock(&mu);
        return;
    }
    lose("a message of an unknown kind");
    vfree(msg);
}

/* Functions handed to the device: aclrtLaunchCallback's (fn, userData) pairs, and the
 * callbacks of VDEC and VENC channels (called with a stream description, a picture
 * description and the userData of the frame): an id for each. */
enum { CB_RT, CB_VDEC, CB_VENC };
typedef struct { void (*fn)(void); void *data; int kind; } Callback;
static Callback *callbacks;
static int ncallbacks, capcallbacks;
static pthread_mutex_t cmu = PTHREAD_MUTEX_INITIALIZER;

static int64_t callback_id(void (*fn)(void), void *data, int kind) {
    pthread_mutex_lock(&cmu);
    for (int j = 0; j < ncallbacks; j++)
        if (callbacks[j].fn == fn && callbacks[j].data == data && callbacks[j].kind == kind) {
            pthread_mutex_unlock(&cmu);
            return j + 1;
        }
    if (ncallbacks == capcallbacks) {
        int cap = capcallbacks ? 2 * capcallbacks : 16;
        Callback *p = realloc(callbacks, (size_t)cap * sizeof(Callback));
        if (!p) { pthread_mutex_unlock(&cmu); return 0; }
        callbacks = p;
        capcallbacks = cap;
    }
    callbacks[ncallbacks].fn = fn;
    callbacks[ncallbacks].data = data;
    callbacks[ncallbacks].kind = kind;
    int64_t id = ++ncallbacks;
    pthread_mutex_unlock(&cmu);
    return id;
}

static Callback callback_of(int64_t id) {
    Callback cb = {0};
    pthread_mutex_lock(&cmu);
    if (id >= 1 && id <= ncallbacks) cb = callbacks[id - 1];
    pthread_mutex_unlock(&cmu);
    return cb;
}

static void reply_error(const V *id, const V *ch, const char *type, const char *text) {
    Buf b = {0};
    e_str(&b, "k"); e_str(&b, "e");
    e_str(&b, "id"); e_int(&b, is_int(id) ? id->i : 0);
    e_str(&b, "ch"); e_int(&b, is_int(ch) ? ch->i : 0);
    e_str(&b, "type"); e_str(&b, type);
    e_str(&b, "msg"); e_str(&b, text);
    send_msg(&b, 5);
    free(b.p);
}

/* Answer a request of the server's: fn.call runs a callback the program launched (the
 * device calls it when its stream reaches it); nothing else is served. */
static void serve(V *req) {
    V *mem = get(req, "mem");
    if (mem) apply_mem(mem);
    V *id = get(req, "id"), *ch = get(req, "ch"), *op = get(req, "op"), *args = get(req, "args");
    if (op && op->t == 's' && strcmp(op->s, "fn.call") == 0) {
        V *f = is_seq(args) && args->n ? args->a[0] : NULL;
        V *fid = f && f->t == 'x' && strcmp(f->s, "cfn") == 0 ? get(f->a[0], "id") : NULL;
        Callback cb = callback_of(is_int(fid) ? fid->i : 0);
        /* a channel's callback: (the two descriptions' handles, the frame's userData) */
        const V *h1 = cb.kind != CB_RT ? item(args, 1) : NULL, *h2 = item(args, 2);
        const V *ud = item(args, 3);
        if (!cb.fn) {
            reply_error(id, ch, "LookupError", "no such callback");
        } else if (cb.kind != CB_RT && (!is_int(h1) || !is_int(h2)
                                         || (ud && ud->t != 'N' && !is_int(ud)))) {
            reply_error(id, ch, "TypeError", "a channel's callback takes two description "
                                             "handles and the frame's user data");
        } else {
            void *user = is_int(ud) ? (void *)(uintptr_t)ud->i : NULL;
            if (cb.kind == CB_VDEC)
                ((aclvdecCallback)cb.fn)((acldvppStreamDesc *)(uintptr_t)h1->i,
                                         (acldvppPicDesc *)(uintptr_t)h2->i, user);
            else if (cb.kind == CB_VENC)
                ((aclvencCallback)cb.fn)((acldvppPicDesc *)(uintptr_t)h1->i,
                                         (acldvppStreamDesc *)(uintptr_t)h2->i, user);
            else
                ((aclrtCallback)cb.fn)(cb.data);
            Buf b = {0};
            e_str(&b, "k"); e_str(&b, "r");
            e_str(&b, "id"); e_int(&b, is_int(id) ? id->i : 0);
            e_str(&b, "ch"); e_int(&b, is_int(ch) ? ch->i : 0);
            e_str(&b, "v"); e_none(&b);
            send_msg(&b, 4);
            free(b.p);
        }
        vfree(req);
        return;
    }
    char text[300];
    snprintf(text, sizeof text, "the C library serves no operation %s",
             op && op->t == 's' ? op->s : "?");
    reply_error(id, ch, "LookupError", text);
    vfree(req);
}

/* Send a request and wait for its reply (serving what the server asks meanwhile). */
static V *request_raw(const char *op, const Buf *args, uint32_t nargs, const Buf *kw,
                      uint32_t nkw) {
    if (lost) return NULL;
    /* pthread_cancel of a thread inside a call (Ascend's venc sample cancels its report
     * thread while it waits in aclrtProcessReport) takes effect after the call: cancelled
     * midway, it would leave the connection's lock held or its reader gone */
    int cancel_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    Waiter w = {0};
    w.ch = channel();
    pthread_mutex_lock(&mu);
    w.id = next_id++;
    w.next = waiters;
    waiters = &w;
    pthread_mutex_unlock(&mu);
    Buf b = {0};
    e_str(&b, "k"); e_str(&b, "q");
    e_str(&b, "id"); e_int(&b, w.id);
    e_str(&b, "ch"); e_int(&b, w.ch);
    e_str(&b, "op"); e_str(&b, op);
    e_str(&b, "args"); e_list(&b, nargs);
    if (args) put(&b, args->p, args->n);
    uint32_t nf = 5;
    if (kw) { e_str(&b, "kw"); e_map(&b, nkw); put(&b, kw->p, kw->n); nf++; }
    int rc = send_msg(&b, nf);
    free(b.p);
    pthread_mutex_lock(&mu);
    while (rc == 0 && !w.reply && !lost) {
        if (w.nq) {
            V *q = w.queue[0];
            memmove(w.queue, w.queue + 1, (size_t)(--w.nq) * sizeof(V *));
            pthread_mutex_unlock(&mu);
            serve(q);
            pthread_mutex_lock(&mu);
            continue;
        }
        if (!reading) {
            reading = 1;
            pthread_mutex_unlock(&mu);
            V *msg = read_msg();
            if (msg) {
                V *mem = get(msg, "mem");
                if (mem) apply_mem(mem);
            }
            pthread_mutex_lock(&mu);
            reading = 0;
            if (!msg) lose("the device server closed the connection");
            else route(msg);
            pthread_cond_broadcast(&cv);
        } else {
            pthread_cond_wait(&cv, &mu);
        }
    }
    for (Waiter **p = &waiters; *p; p = &(*p)->next)
        if (*p == &w) { *p = w.next; break; }
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int j = 0; j < w.nq; j++) vfree(w.queue[j]);
    free(w.queue);
    pthread_setcancelstate(cancel_state, NULL);
    return w.reply;
}

/* -- starting ----------------------------------------------------------------------------- */

/* At the end of the process, after the program's own exit handlers and static destructors
 * (which may still release AscendCL resources): close the connection and wait for the device
 * this library started, so that its last words come before the shell's prompt. */
__attribute__((destructor)) static void at_exit(void) {
    exiting = 1;
    if (sock >= 0) {
        shutdown(sock, SHUT_RDWR);
        close(sock);
        sock = -1;
    }
    if (child > 0) {
        int status;
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
        child = 0;
    }
}

static int start_server(void) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) return -1;
    const char *py = getenv("ACLLAB_PYTHON");
    if (!py || !*py) py = ACLLAB_PYTHON;
    pid_t pid = fork();
    if (pid < 0) { close(sv[0]); close(sv[1]); return -1; }
    if (pid == 0) {
        int fd = dup(sv[1]);           /* without close-on-exec */
        char fdtext[32];
        snprintf(fdtext, sizeof fdtext, "%d", fd);
        const char *old = getenv("PYTHONPATH");
        if (ACLLAB_PYTHONPATH[0]) {
            size_t k = strlen(ACLLAB_PYTHONPATH) + (old ? strlen(old) : 0) + 2;
            char *pp = malloc(k);
            if (pp) {
                snprintf(pp, k, "%s%s%s", ACLLAB_PYTHONPATH, old && *old ? ":" : "",
                         old ? old : "");
                setenv("PYTHONPATH", pp, 1);
            }
        }
        execlp(py, py, "-m", "acllab.native.serve", "--fd", fdtext, (char *)NULL);
        fprintf(stderr, "acllab libascendcl: cannot start the device (%s -m acllab.native."
                        "serve): %s\n", py, strerror(errno));
        _exit(127);
    }
    close(sv[1]);
    child = pid;
    return sv[0];
}

static int connect_path(const char *path) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a.sun_path) return -1;
    strcpy(a.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    if (connect(s, (struct sockaddr *)&a, sizeof a)) { close(s); return -1; }
    return s;
}

static void start(void) {
    const char *path = getenv("ACLLAB_DEVICE");
    if (!getcwd(start_cwd, sizeof start_cwd)) start_cwd[0] = 0;
    char why[600];
    if (path && *path) {
        sock = connect_path(path);
        if (sock < 0) {
            snprintf(why, sizeof why, "cannot connect to the device server ACLLAB_DEVICE=%s: %s",
                     path, strerror(errno));
            lose(why);
            return;
        }
    } else {
        sock = start_server();
        if (sock < 0) { lose("cannot start a device server"); return; }
    }
    /* the preamble: one byte, with the arena's descriptor */
    unsigned char byte = 0;
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {&byte, 1};
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = cbuf;
    m.msg_controllen = sizeof cbuf;
    ssize_t got;
    do { got = recvmsg(sock, &m, MSG_CMSG_CLOEXEC); } while (got < 0 && errno == EINTR);
    if (got != 1 || byte != 1) { lose("the device server sent no preamble"); return; }
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int fd;
            memcpy(&fd, CMSG_DATA(c), sizeof fd);
            struct stat st;
            if (fstat(fd, &st) == 0 && st.st_size > 0) {
                void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                               fd, 0);
                if (p != MAP_FAILED) { arena = p; arena_size = (size_t)st.st_size; }
            }
            close(fd);
        }
    }
    Buf kw = {0};
    e_str(&kw, "protocol"); e_str(&kw, "acllab-device");
    e_str(&kw, "version"); e_int(&kw, PROTOCOL_VERSION);
    e_str(&kw, "client"); e_str(&kw, "c");
    V *r = request_raw("hello", NULL, 0, &kw, 3);
    free(kw.p);
    V *v = get(r, "v");
    V *ver = get(v, "version");
    if (!r || !is_int(ver) || ver->i != PROTOCOL_VERSION) {
        if (r) lose("the device server speaks another version of the protocol");
    }
    vfree(r);
}

/* ------------------------------------------------------------------------------------------
 * calls
 * ---------------------------------------------------------------------------------------- */

static void set_recent(const char *text) {
    free(recent);
    recent = text ? strdup(text) : NULL;
}

static void fail_here(const char *api, int code, const char *why) {
    char text[512];
    snprintf(text, sizeof text, "%s returned %d %s: %s", api, code,
             code == ACL_ERROR_INVALID_PARAM ? "ACL_ERROR_INVALID_PARAM"
             : code == ACL_ERROR_RT_MEMORY_ALLOCATION ? "ACL_ERROR_RT_MEMORY_ALLOCATION" : "",
             why);
    free(local_err);
    local_err = strdup(text);
    fprintf(stderr, "AclWarning: %s\n", text);
}

static uint64_t H(const void *p) { return (uint64_t)(uintptr_t)p; }

/* Call a pyACL function with arguments described by fmt (i: int64, u: uint64, s: string or
 * null, p: a pointer already translated to a device-side address, f: double, N: null, c: a
 * callback's id (null for none); L H F S B D U: an array of int64, handles, floats, strings,
 * bools, data types or uint32, given as its count and its pointer); the value of the reply
 * (caller frees), or NULL when the call could not be made (the code in *code). */
static V *call(int *code, const char *op, const char *fmt, ...) {
    pthread_once(&once, start);
    *code = ACL_ERROR_FAILURE;
    if (lost) return NULL;
    free(local_err);
    local_err = NULL;
    Buf a = {0};
    uint32_t n = 0;
    va_list ap;
    va_start(ap, fmt);
    for (const char *f = fmt; *f; f++, n++) {
        switch (*f) {
        case 'i': e_int(&a, va_arg(ap, int64_t)); break;
        case 'u': case 'p': e_uint(&a, va_arg(ap, uint64_t)); break;
        case 'f': e_double(&a, va_arg(ap, double)); break;
        case 's': { const char *s = va_arg(ap, const char *); if (s) e_str(&a, s); else e_none(&a); break; }
        case 'N': e_none(&a); break;
        case 'L': case 'H': case 'F': case 'S': case 'B': case 'D': case 'U': {
            /* an array: its count (int), then its pointer; a list on the wire (null when
             * the pointer is NULL or the count negative: pyACL's TypeError, so 100000) */
            int k = va_arg(ap, int);
            const void *p = va_arg(ap, const void *);
            if (k < 0 || (k > 0 && !p)) { e_none(&a); break; }
            e_list(&a, (uint32_t)k);
            for (int j = 0; j < k; j++) {
                switch (*f) {
                case 'L': e_int(&a, ((const int64_t *)p)[j]); break;
                case 'H': e_uint(&a, H(((void *const *)p)[j])); break;
                case 'F': e_double(&a, (double)((const float *)p)[j]); break;
                case 'S': {
                    const char *t = ((const char *const *)p)[j];
                    if (t) e_str(&a, t); else e_none(&a);
                    break;
                }
                case 'B': e_bool(&a, ((const uint8_t *)p)[j] != 0); break;
                case 'D': e_int(&a, (int64_t)((const aclDataType *)p)[j]); break;
                case 'U': e_int(&a, (int64_t)((const uint32_t *)p)[j]); break;
                }
            }
            break;
        }
        case 'M': {                     /* an aclmdlIODims, as pyACL's dims map */
            const aclmdlIODims *d = va_arg(ap, const aclmdlIODims *);
            if (!d || d->dimCount > ACL_MAX_DIM_CNT) { e_none(&a); break; }
            e_map(&a, 3);
            e_str(&a, "name");
            char name[ACL_MAX_TENSOR_NAME_LEN + 1];
            memcpy(name, d->name, ACL_MAX_TENSOR_NAME_LEN);
            name[ACL_MAX_TENSOR_NAME_LEN] = 0;
            e_str(&a, name);
            e_str(&a, "dimCount"); e_int(&a, (int64_t)d->dimCount);
            e_str(&a, "dims"); e_list(&a, (uint32_t)d->dimCount);
            for (size_t j = 0; j < d->dimCount; j++) e_int(&a, d->dims[j]);
            break;
        }
        case 'c': {                     /* a callback: its id, as a client function */
            int64_t id = va_arg(ap, int64_t);
            Callback cb = callback_of(id);
            if (!cb.fn) { e_none(&a); break; }      /* no function: pyACL's TypeError */
            static const char *names[] = {"aclrtCallback", "aclvdecCallback", "aclvencCallback"};
            static const char *params[][3] = {{"user_data", NULL, NULL},
                                              {"input", "output", "user_data"},
                                              {"input", "output", "user_data"}};
            uint32_t np = cb.kind == CB_RT ? 1 : 3;
            e_tag(&a, 'x');
            unsigned char k = 3;
            put(&a, &k, 1);
            put(&a, "cfn", 3);
            e_map(&a, 5);
            e_str(&a, "id"); e_int(&a, id);
            e_str(&a, "name"); e_str(&a, names[cb.kind]);
            e_str(&a, "qualname"); e_str(&a, names[cb.kind]);
            e_str(&a, "module"); e_none(&a);
            e_str(&a, "params");
            e_list(&a, np);
            for (uint32_t j = 0; j < np; j++) {
                e_list(&a, 3); e_str(&a, params[cb.kind][j]); e_int(&a, 1);
                e_bool(&a, cb.kind == CB_RT);
            }
            break;
        }
        }
    }
    va_end(ap);
    V *r = request_raw(op, &a, n, NULL, 0);
    free(a.p);
    if (!r) return NULL;
    V *k = get(r, "k");
    if (k && k->t == 's' && strcmp(k->s, "e") == 0) {
        V *type = get(r, "type"), *msg = get(r, "msg"), *c = get(r, "code");
        char text[1024];
        snprintf(text, sizeof text, "%s: %s", type && type->t == 's' ? type->s : "Error",
                 msg && msg->t == 's' ? msg->s : "");
        /* pyACL raised: AclError in strict mode carries the code; a malformed argument
         * (TypeError) is an invalid parameter to C */
        *code = is_int(c) ? (int)c->i : ACL_ERROR_INVALID_PARAM;
        free(local_err);
        local_err = strdup(text);
        fprintf(stderr, "acllab libascendcl: %s (%s)\n", op, text);
        vfree(r);
        return NULL;
    }
    V *v = get(r, "v");
    V *out = NULL;
    if (v) {                            /* detach the value from the message */
        for (uint32_t j = 0; j < r->n; j++)
            if (r->a[2 * j + 1] == v) { r->a[2 * j + 1] = calloc(1, sizeof(V)); r->a[2 * j + 1]->t = 'N'; }
        out = v;
    }
    vfree(r);
    *code = 0;
    return out;
}

/* The code of a pyACL return value: an int, or the last item of (values..., ret). */
static int ret_of(const V *v) {
    if (is_int(v)) return (int)v->i;
    if (is_seq(v) && v->n && is_int(v->a[v->n - 1])) return (int)v->a[v->n - 1]->i;
    return ACL_ERROR_FAILURE;
}

static const V *item(const V *v, uint32_t j) { return is_seq(v) && j < v->n ? v->a[j] : NULL; }
static int64_t int_at(const V *v, uint32_t j) { const V *x = item(v, j); return is_int(x) ? x->i : 0; }

static int fin(int code, V *v) {
    if (!v) return code;
    int r = ret_of(v);
    vfree(v);
    return r;
}

/* A (value, ret) call: the value into *out when ret is 0. */
static int fin_out(int code, V *v, int64_t *out) {
    if (!v) return code;
    int r = ret_of(v);
    if (r == 0) *out = int_at(v, 0);
    vfree(v);
    return r;
}

#define STATUS(op, fmt, ...) do { int c_; V *v_ = call(&c_, op, fmt, __VA_ARGS__); \
    return fin(c_, v_); } while (0)
#define STATUS0(op) do { int c_; V *v_ = call(&c_, op, ""); return fin(c_, v_); } while (0)

#define NEED(ptr, api) do { if (!(ptr)) { fail_here(api, ACL_ERROR_INVALID_PARAM, \
    #ptr " is a null pointer"); return ACL_ERROR_INVALID_PARAM; } } while (0)


/* -- host pointers ------------------------------------------------------------------------ */

/* The server's address for local host pointer p, when it lies in the shared arena. */
static int pinned_sim(const void *p, uint64_t *sim) {
    const unsigned char *q = p;
    if (!arena || q < arena || q >= arena + arena_size) return 0;
    pthread_mutex_lock(&pmu);
    for (int j = npinned - 1; j >= 0; j--) {
        if (q >= pinned[j].local && q < pinned[j].local + (pinned[j].size ? pinned[j].size : 1)) {
            *sim = pinned[j].sim + (uint64_t)(q - pinned[j].local);
            pthread_mutex_unlock(&pmu);
            return 1;
        }
    }
    pthread_mutex_unlock(&pmu);
    return 0;
}

/* The address the device knows for [p, p+k): a pinned buffer's, a registered host buffer's
 * (registering it now: pyACL's bytes_to_ptr), or p itself (a device address, or memory this
 * process cannot read, for the device to judge). */
static uint64_t host_addr(const void *p, size_t k) {
    uint64_t sim;
    int ch = channel();
    if (!p) return 0;
    if (pinned_sim(p, &sim)) return sim;
    const unsigned char *q = p;
    if (arena && q >= arena && q < arena + arena_size) return H(p);   /* freed pinned memory */
    size_t need = k ? k : 1;
    pthread_mutex_lock(&pmu);
    for (int j = npageable - 1; j >= 0; j--) {
        Pageable *e = &pageable[j];
        if (q >= e->local && q + need <= e->local + e->size) {
            sim = e->sim + (uint64_t)(q - e->local);
            e->owner = ch;
            pthread_mutex_unlock(&pmu);
            return sim;
        }
    }
    pthread_mutex_unlock(&pmu);
    unsigned char *copy = malloc(need);
    if (!copy) return H(p);
    if (!safe_read(p, copy, need)) { free(copy); return H(p); }
    Buf a = {0};
    e_bytes(&a, copy, need);
    e_str(&a, LABEL);
    e_bool(&a, 1);
    V *r = request_raw("host.register", &a, 3, NULL, 0);
    free(a.p);
    V *v = get(r, "v");
    if (!r || !is_int(v) || v->i == 0) { vfree(r); free(copy); return H(p); }
    sim = (uint64_t)v->i;
    vfree(r);
    pthread_mutex_lock(&pmu);
    if (npageable == MAX_PAGEABLE) {          /* forget the oldest one */
        if (ndead < (int)(sizeof dead / sizeof dead[0])) dead[ndead++] = pageable[0].sim;
        free(pageable[0].snap);
        memmove(pageable, pageable + 1, (MAX_PAGEABLE - 1) * sizeof(Pageable));
        npageable--;
    }
    pageable[npageable].local = (unsigned char *)p;
    pageable[npageable].size = need;
    pageable[npageable].sim = sim;
    pageable[npageable].snap = copy;
    pageable[npageable].owner = ch;
    npageable++;
    pthread_mutex_unlock(&pmu);
    return sim;
}

/* The bytes a copy may touch from p: count, or the span of a 2-D copy. */
static size_t span2d(size_t pitch, size_t width, size_t height) {
    return height ? (height - 1) * pitch + width : 0;
}

/* ------------------------------------------------------------------------------------------
 * the AscendCL functions
 * ---------------------------------------------------------------------------------------- */

static const char *server_path(const char *path, char *buf, size_t k);

aclError aclInit(const char *configPath) {
    pthread_once(&once, start);
    if (configPath && *configPath) {
        char buf[8192];
        STATUS("acl.init", "s", server_path(configPath, buf, sizeof buf));
    }
    STATUS0("acl.init");
}

aclError aclFinalize(void) { STATUS0("acl.finalize"); }

const char *aclGetRecentErrMsg(void) {
    if (local_err) { set_recent(local_err); free(local_err); local_err = NULL; return recent; }
    int code;
    V *v = call(&code, "acl.get_recent_err_msg", "");
    set_recent(v && v->t == 's' && v->n ? v->s : NULL);
    vfree(v);
    return recent;
}

aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion) {
    NEED(majorVersion, "aclrtGetVersion");
    NEED(minorVersion, "aclrtGetVersion");
    NEED(patchVersion, "aclrtGetVersion");
    int code;
    V *v = call(&code, "acl.get_version", "");
    if (!v) return code;
    int r = ret_of(v);
    if (r == 0) {
        *majorVersion = (int32_t)int_at(v, 0);
        *minorVersion = (int32_t)int_at(v, 1);
        *patchVersion = (int32_t)int_at(v, 2);
    }
    vfree(v);
    return r;
}

const char *aclrtGetSocName(void) {
    int code;
    V *v = call(&code, "acl.get_soc_name", "");
    static __thread char name[64];
    if (!v || v->t != 's') { vfree(v); return NULL; }
    snprintf(name, sizeof name, "%s", v->s);
    vfree(v);
    return name;
}

/* -- devices ---------------------------------------------------------------------------- */

aclError aclrtSetDevice(int32_t deviceId) { STATUS("acl.rt.set_device", "i", (int64_t)deviceId); }
aclError aclrtResetDevice(int32_t deviceId) { STATUS("acl.rt.reset_device", "i", (int64_t)deviceId); }
aclError aclrtResetDeviceForce(int32_t deviceId) {
    STATUS("acl.rt.reset_device_force", "i", (int64_t)deviceId);
}
aclError aclrtSynchronizeDevice(void) { STATUS0("acl.rt.synchronize_device"); }

/* (value, ret) calls: the value into *out as type T when ret is 0 */
#define OUT1(T, out, op, fmt, ...) do { int c_; int64_t x_ = 0; \
    V *v_ = call(&c_, op, fmt, __VA_ARGS__); \
    int r_ = fin_out(c_, v_, &x_); \
    if (r_ == 0) { *(out) = (T)x_; } \
    return r_; } while (0)
#define OUT1_0(T, out, op) do { int c_; int64_t x_ = 0; \
    V *v_ = call(&c_, op, ""); \
    int r_ = fin_out(c_, v_, &x_); \
    if (r_ == 0) { *(out) = (T)x_; } \
    return r_; } while (0)

aclError aclGetDeviceCapability(uint32_t deviceId, aclDeviceInfo deviceInfo, int64_t *value) {
    NEED(value, "aclGetDeviceCapability");
    OUT1(int64_t, value, "acl.get_device_capability", "ii", (int64_t)deviceId,
         (int64_t)deviceInfo);
}

/* Differs from hardware: the message (formatted here) goes to acllab's log as acl.app_log's
 * does; the function, file and line CANN's log line names are not kept. */
void aclAppLog(aclLogLevel logLevel, const char *func, const char *file, uint32_t line,
               const char *fmt, ...) {
    (void)func; (void)file; (void)line;
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt ? fmt : "", ap);
    va_end(ap);
    int code;
    V *v = call(&code, "acl.app_log", "is", (int64_t)logLevel, text);
    vfree(v);
}

aclError aclrtGetDevice(int32_t *deviceId) {
    NEED(deviceId, "aclrtGetDevice");
    OUT1_0(int32_t, deviceId, "acl.rt.get_device");
}
aclError aclrtGetDeviceCount(uint32_t *count) {
    NEED(count, "aclrtGetDeviceCount");
    OUT1_0(uint32_t, count, "acl.rt.get_device_count");
}
aclError aclrtGetRunMode(aclrtRunMode *runMode) {
    NEED(runMode, "aclrtGetRunMode");
    OUT1_0(aclrtRunMode, runMode, "acl.rt.get_run_mode");
}

/* -- contexts ----------------------------------------------------------------------------- */

aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId) {
    NEED(context, "aclrtCreateContext");
    OUT1(aclrtContext, context, "acl.rt.create_context", "i", (int64_t)deviceId);
}
aclError aclrtDestroyContext(aclrtContext context) { STATUS("acl.rt.destroy_context", "u", H(context)); }
aclError aclrtSetCurrentContext(aclrtContext context) { STATUS("acl.rt.set_context", "u", H(context)); }
aclError aclrtGetCurrentContext(aclrtContext *context) {
    NEED(context, "aclrtGetCurrentContext");
    OUT1_0(aclrtContext, context, "acl.rt.get_context");
}

/* -- streams ------------------------------------------------------------------------------ */

aclError aclrtCreateStream(aclrtStream *stream) {
    NEED(stream, "aclrtCreateStream");
    OUT1_0(aclrtStream, stream, "acl.rt.create_stream");
}
aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag) {
    NEED(stream, "aclrtCreateStreamWithConfig");
    OUT1(aclrtStream, stream, "acl.rt.create_stream_with_config", "uu", (uint64_t)priority,
         (uint64_t)flag);
}
aclError aclrtDestroyStream(aclrtStream stream) { STATUS("acl.rt.destroy_stream", "u", H(stream)); }
aclError aclrtDestroyStreamForce(aclrtStream stream) {
    STATUS("acl.rt.destroy_stream_force", "u", H(stream));
}
aclError aclrtSynchronizeStream(aclrtStream stream) {
    STATUS("acl.rt.synchronize_stream", "u", H(stream));
}
aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
    STATUS("acl.rt.synchronize_stream_with_timeout", "ui", H(stream), (int64_t)timeout);
}
aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status) {
    NEED(status, "aclrtStreamQuery");
    OUT1(aclrtStreamStatus, status, "acl.rt.stream_query", "u", H(stream));
}
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
    STATUS("acl.rt.stream_wait_event", "uu", H(stream), H(event));
}
aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode) {
    STATUS("acl.rt.set_stream_failure_mode", "uu", H(stream), mode);
}
aclError aclrtSetOpWaitTimeout(uint32_t timeout) {
    STATUS("acl.rt.set_op_wait_timeout", "u", (uint64_t)timeout);
}

/* -- events ------------------------------------------------------------------------------- */

aclError aclrtCreateEvent(aclrtEvent *event) {
    NEED(event, "aclrtCreateEvent");
    OUT1_0(aclrtEvent, event, "acl.rt.create_event");
}
aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag) {
    NEED(event, "aclrtCreateEventWithFlag");
    OUT1(aclrtEvent, event, "acl.rt.create_event_with_flag", "u", (uint64_t)flag);
}
aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag) {
    NEED(event, "aclrtCreateEventExWithFlag");
    OUT1(aclrtEvent, event, "acl.rt.create_event_ex_with_flag", "u", (uint64_t)flag);
}
aclError aclrtDestroyEvent(aclrtEvent event) { STATUS("acl.rt.destroy_event", "u", H(event)); }
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
    STATUS("acl.rt.record_event", "uu", H(event), H(stream));
}
aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
    STATUS("acl.rt.reset_event", "uu", H(event), H(stream));
}
aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status) {
    NEED(status, "aclrtQueryEvent");
    OUT1(aclrtEventStatus, status, "acl.rt.query_event", "u", H(event));
}
aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status) {
    NEED(status, "aclrtQueryEventStatus");
    OUT1(aclrtEventRecordedStatus, status, "acl.rt.query_event_status", "u", H(event));
}
aclError aclrtSynchronizeEvent(aclrtEvent event) { STATUS("acl.rt.synchronize_event", "u", H(event)); }
aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout) {
    STATUS("acl.rt.synchronize_event_with_timeout", "ui", H(event), (int64_t)timeout);
}
aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent) {
    NEED(ms, "aclrtEventElapsedTime");
    int code;
    V *v = call(&code, "acl.rt.event_elapsed_time", "uu", H(startEvent), H(endEvent));
    if (!v) return code;
    int r = ret_of(v);
    const V *x = item(v, 0);
    if (r == 0) *ms = x && x->t == 'd' ? (float)x->d : (float)int_at(v, 0);
    vfree(v);
    return r;
}

/* -- callbacks ------------------------------------------------------------------------------ */

/* The server's thread for a thread of this program (named by its pthread_t), as the
 * protocol's thread.ident gives it: what the runtime knows the report thread as. */
static int server_thread(uint64_t threadId, uint64_t *out) {
    int code;
    V *v = call(&code, "thread.ident", "i", (int64_t)channel_of(threadId));
    if (!is_int(v)) { vfree(v); return code ? code : ACL_ERROR_FAILURE; }
    *out = (uint64_t)v->i;
    vfree(v);
    return 0;
}

/* Wait (up to 5 s) until the thread named tid first calls aclrtProcessReport: whatever it
 * does before its loop (setting its context, say) is then done before the caller goes on, so
 * a program with a report thread gives the same log and trace on every run, as pyACL's
 * acl.util.start_thread does for a Python report thread. */
static void wait_first_poll(uint64_t tid) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&mu);
    for (;;) {
        int j;
        for (j = 0; j < nnamed && named[j].tid != tid; j++) {}
        if (j == nnamed || named[j].polled) break;
        if (pthread_cond_timedwait(&polled_cv, &mu, &until) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&mu);
}

aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream) {
    uint64_t tid;
    int code = server_thread(threadId, &tid);
    if (code) return code;
    if (threadId != (uint64_t)pthread_self()) wait_first_poll(threadId);
    STATUS("acl.rt.subscribe_report", "uu", tid, H(stream));
}
aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream) {
    uint64_t tid;
    int code = server_thread(threadId, &tid);
    if (code) return code;
    STATUS("acl.rt.unsubscribe_report", "uu", tid, H(stream));
}
aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType blockType,
                             aclrtStream stream) {
    NEED(fn, "aclrtLaunchCallback");
    int64_t id = callback_id((void (*)(void))fn, userData, CB_RT);
    if (!id) {
        fail_here("aclrtLaunchCallback", ACL_ERROR_BAD_ALLOC, "out of host memory");
        return ACL_ERROR_BAD_ALLOC;
    }
    STATUS("acl.rt.launch_callback", "cNiu", id, (int64_t)blockType, H(stream));
}
aclError aclrtProcessReport(int32_t timeout) {
    uint64_t me = (uint64_t)pthread_self();
    channel();
    pthread_mutex_lock(&mu);
    for (int j = 0; j < nnamed; j++)
        if (named[j].tid == me && !named[j].polled) {
            named[j].polled = 1;
            pthread_cond_broadcast(&polled_cv);
        }
    pthread_mutex_unlock(&mu);
    STATUS("acl.rt.process_report", "i", (int64_t)timeout);
}

/* -- memory ------------------------------------------------------------------------------- */

static aclError malloc_like(const char *op, void **devPtr, size_t size, int policy) {
    OUT1(void *, devPtr, op, "ui", (uint64_t)size, (int64_t)policy);
}
aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
    NEED(devPtr, "aclrtMalloc");
    return malloc_like("acl.rt.malloc", devPtr, size, (int)policy);
}
aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
    NEED(devPtr, "aclrtMallocAlign32");
    return malloc_like("acl.rt.malloc_align32", devPtr, size, (int)policy);
}
aclError aclrtMallocCached(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
    NEED(devPtr, "aclrtMallocCached");
    return malloc_like("acl.rt.malloc_cached", devPtr, size, (int)policy);
}
aclError aclrtFree(void *devPtr) { STATUS("acl.rt.free", "u", H(devPtr)); }

aclError aclrtMallocHost(void **hostPtr, size_t size) {
    NEED(hostPtr, "aclrtMallocHost");
    int code;
    V *v = call(&code, "acl.rt.malloc_host", "u", (uint64_t)size);
    if (!v) return code;
    int r = ret_of(v);
    if (r == 0) {
        uint64_t sim = (uint64_t)int_at(v, 0);
        V *where = call(&code, "host.locate", "u", sim);
        if (!is_seq(where) || where->n < 1 || !is_int(where->a[0]) || !arena
            || (uint64_t)where->a[0]->i >= arena_size) {
            vfree(where);
            vfree(v);
            fail_here("aclrtMallocHost", ACL_ERROR_RT_MEMORY_ALLOCATION,
                      "the device gave pinned memory outside the memory it shares with "
                      "this program");
            return ACL_ERROR_RT_MEMORY_ALLOCATION;
        }
        unsigned char *local = arena + where->a[0]->i;
        vfree(where);
        pthread_mutex_lock(&pmu);
        for (int j = 0; j < npinned; j++)       /* an old entry for the same bytes */
            if (pinned[j].local == local) pinned[j] = pinned[--npinned];
        if (npinned == cappinned) {
            int cap = cappinned ? 2 * cappinned : 16;
            Pinned *p = realloc(pinned, (size_t)cap * sizeof(Pinned));
            if (p) { pinned = p; cappinned = cap; }
        }
        if (npinned < cappinned) pinned[npinned++] = (Pinned){local, size, sim};
        pthread_mutex_unlock(&pmu);
        *hostPtr = local;
    }
    vfree(v);
    return r;
}

aclError aclrtFreeHost(void *hostPtr) {
    uint64_t sim = H(hostPtr);
    int known = pinned_sim(hostPtr, &sim);
    int code;
    V *v = call(&code, "acl.rt.free_host", "u", sim);
    if (!v) return code;
    int r = ret_of(v);
    vfree(v);
    if (r == 0 && known) {
        pthread_mutex_lock(&pmu);
        for (int j = 0; j < npinned; j++)
            if (pinned[j].local == (unsigned char *)hostPtr) { pinned[j] = pinned[--npinned]; break; }
        pthread_mutex_unlock(&pmu);
    }
    return r;
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free_, size_t *total) {
    NEED(free_, "aclrtGetMemInfo");
    NEED(total, "aclrtGetMemInfo");
    int code;
    V *v = call(&code, "acl.rt.get_mem_info", "i", (int64_t)attr);
    if (!v) return code;
    int r = ret_of(v);
    if (r == 0) { *free_ = (size_t)int_at(v, 0); *total = (size_t)int_at(v, 1); }
    vfree(v);
    return r;
}

/* -- copies and fills ------------------------------------------------------------------------ */

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
    uint64_t d = host_addr(devPtr, maxCount);
    STATUS("acl.rt.memset", "uuiu", d, (uint64_t)maxCount, (int64_t)value, (uint64_t)count);
}
aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
                          aclrtStream stream) {
    uint64_t d = host_addr(devPtr, maxCount);
    STATUS("acl.rt.memset_async", "uuiuu", d, (uint64_t)maxCount, (int64_t)value,
           (uint64_t)count, H(stream));
}
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                     aclrtMemcpyKind kind) {
    uint64_t s = host_addr(src, count), d = host_addr(dst, destMax);
    STATUS("acl.rt.memcpy", "uuuui", d, (uint64_t)destMax, s, (uint64_t)count, (int64_t)kind);
}
aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream stream) {
    uint64_t s = host_addr(src, count), d = host_addr(dst, destMax);
    STATUS("acl.rt.memcpy_async", "uuuuiu", d, (uint64_t)destMax, s, (uint64_t)count,
           (int64_t)kind, H(stream));
}
aclError aclrtMemcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                       size_t height, aclrtMemcpyKind kind) {
    uint64_t s = host_addr(src, span2d(spitch, width, height));
    uint64_t d = host_addr(dst, span2d(dpitch, width, height));
    STATUS("acl.rt.memcpy2d", "uuuuuui", d, (uint64_t)dpitch, s, (uint64_t)spitch,
           (uint64_t)width, (uint64_t)height, (int64_t)kind);
}
aclError aclrtMemcpy2dAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                            size_t width, size_t height, aclrtMemcpyKind kind,
                            aclrtStream stream) {
    uint64_t s = host_addr(src, span2d(spitch, width, height));
    uint64_t d = host_addr(dst, span2d(dpitch, width, height));
    STATUS("acl.rt.memcpy2d_async", "uuuuuuiu", d, (uint64_t)dpitch, s, (uint64_t)spitch,
           (uint64_t)width, (uint64_t)height, (int64_t)kind, H(stream));
}

/* -- data buffers --------------------------------------------------------------------------- */

/* The local pointer for an address the device gave back (the inverse of host_addr). */
static void *local_of(uint64_t sim) {
    void *out = (void *)(uintptr_t)sim;
    pthread_mutex_lock(&pmu);
    for (int j = npinned - 1; j >= 0; j--) {
        if (sim >= pinned[j].sim && sim < pinned[j].sim + (pinned[j].size ? pinned[j].size : 1)) {
            out = pinned[j].local + (sim - pinned[j].sim);
            goto done;
        }
    }
    for (int j = npageable - 1; j >= 0; j--) {
        if (sim >= pageable[j].sim && sim < pageable[j].sim + pageable[j].size) {
            out = pageable[j].local + (sim - pageable[j].sim);
            goto done;
        }
    }
done:
    pthread_mutex_unlock(&pmu);
    return out;
}

/* A call whose C function returns its value (pyACL's bare functions): the value, or 0. */
static int64_t bare(const char *op, const char *fmt, uint64_t a, uint64_t b) {
    int code;
    V *v = fmt[0] == 0 ? call(&code, op, "") : fmt[1] == 0 ? call(&code, op, fmt, a)
                                                           : call(&code, op, fmt, a, b);
    int64_t out = is_int(v) ? v->i : 0;
    vfree(v);
    return out;
}

aclDataBuffer *aclCreateDataBuffer(void *data, size_t size) {
    uint64_t d = host_addr(data, size);
    return (aclDataBuffer *)(uintptr_t)bare("acl.create_data_buffer", "uu", d, (uint64_t)size);
}
aclError aclDestroyDataBuffer(const aclDataBuffer *dataBuffer) {
    STATUS("acl.destroy_data_buffer", "u", H(dataBuffer));
}
aclError aclUpdateDataBuffer(aclDataBuffer *dataBuffer, void *data, size_t size) {
    uint64_t d = host_addr(data, size);
    STATUS("acl.update_data_buffer", "uuu", H(dataBuffer), d, (uint64_t)size);
}
void *aclGetDataBufferAddr(const aclDataBuffer *dataBuffer) {
    return local_of((uint64_t)bare("acl.get_data_buffer_addr", "u", H(dataBuffer), 0));
}
uint32_t aclGetDataBufferSize(const aclDataBuffer *dataBuffer) {
    return (uint32_t)bare("acl.get_data_buffer_size", "u", H(dataBuffer), 0);
}
size_t aclGetDataBufferSizeV2(const aclDataBuffer *dataBuffer) {
    return (size_t)bare("acl.get_data_buffer_size_v2", "u", H(dataBuffer), 0);
}
size_t aclDataTypeSize(aclDataType dataType) {
    return (size_t)bare("acl.data_type_size", "i", (uint64_t)(int64_t)dataType, 0);
}

/* Half precision (binary16) from and to float, as numpy's float16 converts (npy_half.c):
 * round to nearest, ties to even; overflow to infinity; a NaN keeps the top bits of its
 * payload (one bit set if none survive). Pure host functions in CANN too (acl_base.h), so no
 * pyACL twin and no call to the device. */
float aclFloat16ToFloat(aclFloat16 value) {
    uint32_t sign = (uint32_t)(value & 0x8000u) << 16, exp = (value >> 10) & 0x1fu;
    uint32_t man = value & 0x3ffu, x;
    if (exp == 0 && man == 0) {
        x = sign;
    } else if (exp == 0) {                    /* subnormal: normalise */
        exp = 113;
        while (!(man & 0x400u)) { man <<= 1; exp--; }
        x = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    } else if (exp == 31) {
        x = sign | 0x7f800000u | (man << 13);
    } else {
        x = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}
aclFloat16 aclFloatToFloat16(float value) {
    uint32_t x;
    memcpy(&x, &value, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xff) {                        /* infinity, or NaN: its top payload bits */
        uint32_t nan = 0x7c00u | (man >> 13);
        return (aclFloat16)(sign | (man && nan == 0x7c00u ? 0x7c01u : nan));
    }
    int e = (int)exp - 112;                   /* the half's biased exponent */
    if (e >= 31) return (aclFloat16)(sign | 0x7c00u);
    uint32_t half, rem, mid;
    if (e <= 0) {                             /* a subnormal half, or zero */
        if (e < -10) return (aclFloat16)sign;
        man |= 0x800000u;
        int shift = 14 - e;
        half = man >> shift;
        rem = man & ((1u << shift) - 1);
        mid = 1u << (shift - 1);
    } else {
        half = ((uint32_t)e << 10) | (man >> 13);
        rem = man & 0x1fffu;
        mid = 0x1000u;
    }
    if (rem > mid || (rem == mid && (half & 1u))) half++;   /* a carry rounds up to inf */
    return (aclFloat16)(sign | half);
}

/* -- models ------------------------------------------------------------------------------ */

/* A path as the device server should read it: as given while the program is still in the
 * directory it started in (the server's), else made absolute. */
static const char *server_path(const char *path, char *buf, size_t k) {
    char now[4096];
    if (!path || path[0] == '/' || !getcwd(now, sizeof now) || strcmp(now, start_cwd) == 0)
        return path;
    snprintf(buf, k, "%s/%s", now, path);
    return buf;
}

aclError aclmdlLoadFromFile(const char *modelPath, uint32_t *modelId) {
    NEED(modelId, "aclmdlLoadFromFile");
    char buf[8192];
    OUT1(uint32_t, modelId, "acl.mdl.load_from_file", "s",
         server_path(modelPath, buf, sizeof buf));
}
aclError aclmdlLoadFromMem(const void *model, size_t modelSize, uint32_t *modelId) {
    NEED(modelId, "aclmdlLoadFromMem");
    uint64_t m = host_addr(model, modelSize);
    OUT1(uint32_t, modelId, "acl.mdl.load_from_mem", "uu", m, (uint64_t)modelSize);
}
aclError aclmdlLoadFromFileWithMem(const char *modelPath, uint32_t *modelId, void *workPtr,
                                   size_t workSize, void *weightPtr, size_t weightSize) {
    NEED(modelId, "aclmdlLoadFromFileWithMem");
    char buf[8192];
    OUT1(uint32_t, modelId, "acl.mdl.load_from_file_with_mem", "suuuu",
         server_path(modelPath, buf, sizeof buf), H(workPtr), (uint64_t)workSize,
         H(weightPtr), (uint64_t)weightSize);
}
aclError aclmdlQuerySize(const char *fileName, size_t *workSize, size_t *weightSize) {
    NEED(workSize, "aclmdlQuerySize");
    NEED(weightSize, "aclmdlQuerySize");
    char buf[8192];
    int code;
    V *v = call(&code, "acl.mdl.query_size", "s", server_path(fileName, buf, sizeof buf));
    if (!v) return code;
    int r = ret_of(v);
    if (r == 0) { *workSize = (size_t)int_at(v, 0); *weightSize = (size_t)int_at(v, 1); }
    vfree(v);
    return r;
}
aclError aclmdlUnload(uint32_t modelId) { STATUS("acl.mdl.unload", "u", (uint64_t)modelId); }
aclError aclmdlExecute(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output) {
    STATUS("acl.mdl.execute", "uuu", (uint64_t)modelId, H(input), H(output));
}
aclError aclmdlExecuteAsync(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output,
                            aclrtStream stream) {
    STATUS("acl.mdl.execute_async", "uuuu", (uint64_t)modelId, H(input), H(output), H(stream));
}

aclmdlDesc *aclmdlCreateDesc(void) {
    return (aclmdlDesc *)(uintptr_t)bare("acl.mdl.create_desc", "", 0, 0);
}
aclError aclmdlDestroyDesc(aclmdlDesc *modelDesc) {
    STATUS("acl.mdl.destroy_desc", "u", H(modelDesc));
}
aclError aclmdlGetDesc(aclmdlDesc *modelDesc, uint32_t modelId) {
    STATUS("acl.mdl.get_desc", "uu", H(modelDesc), (uint64_t)modelId);
}
size_t aclmdlGetNumInputs(aclmdlDesc *modelDesc) {
    return (size_t)bare("acl.mdl.get_num_inputs", "u", H(modelDesc), 0);
}
size_t aclmdlGetNumOutputs(aclmdlDesc *modelDesc) {
    return (size_t)bare("acl.mdl.get_num_outputs", "u", H(modelDesc), 0);
}
size_t aclmdlGetInputSizeByIndex(aclmdlDesc *modelDesc, size_t index) {
    return (size_t)bare("acl.mdl.get_input_size_by_index", "uu", H(modelDesc), (uint64_t)index);
}
size_t aclmdlGetOutputSizeByIndex(aclmdlDesc *modelDesc, size_t index) {
    return (size_t)bare("acl.mdl.get_output_size_by_index", "uu", H(modelDesc), (uint64_t)index);
}

/* An aclmdlIODims from pyACL's dims map. */
static void fill_dims(const V *d, aclmdlIODims *out) {
    memset(out, 0, sizeof *out);
    if (!d || d->t != 'm') return;
    V *name = get(d, "name"), *list = get(d, "dims");
    if (name && name->t == 's') snprintf(out->name, sizeof out->name, "%s", name->s);
    if (is_seq(list)) {
        out->dimCount = list->n < ACL_MAX_DIM_CNT ? list->n : ACL_MAX_DIM_CNT;
        for (size_t j = 0; j < out->dimCount; j++)
            out->dims[j] = is_int(list->a[j]) ? list->a[j]->i : 0;
    }
}

static aclError dims(const char *op, const char *api, const aclmdlDesc *modelDesc, size_t index,
                     aclmdlIODims *out) {
    NEED(out, api);
    int code;
    V *v = call(&code, op, "uu", H(modelDesc), (uint64_t)index);
    if (!v) return code;
    int r = ret_of(v);
    const V *d = item(v, 0);
    if (r == 0 && d && d->t == 'm') fill_dims(d, out);
    vfree(v);
    return r;
}
aclError aclmdlGetInputDims(const aclmdlDesc *modelDesc, size_t index, aclmdlIODims *d) {
    return dims("acl.mdl.get_input_dims", "aclmdlGetInputDims", modelDesc, index, d);
}
aclError aclmdlGetOutputDims(const aclmdlDesc *modelDesc, size_t index, aclmdlIODims *d) {
    return dims("acl.mdl.get_output_dims", "aclmdlGetOutputDims", modelDesc, index, d);
}
aclError aclmdlGetCurOutputDims(const aclmdlDesc *modelDesc, size_t index, aclmdlIODims *d) {
    return dims("acl.mdl.get_cur_output_dims", "aclmdlGetCurOutputDims", modelDesc, index, d);
}

/* Names live as long as the program (CANN's live as long as the description). */
static const char *intern(const char *s) {
    static char **names;
    static int n, cap;
    static pthread_mutex_t nmu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&nmu);
    for (int j = 0; j < n; j++)
        if (strcmp(names[j], s) == 0) { pthread_mutex_unlock(&nmu); return names[j]; }
    if (n == cap) {
        int c = cap ? 2 * cap : 16;
        char **p = realloc(names, (size_t)c * sizeof(char *));
        if (!p) { pthread_mutex_unlock(&nmu); return ""; }
        names = p;
        cap = c;
    }
    char *copy = strdup(s);
    if (!copy) { pthread_mutex_unlock(&nmu); return ""; }
    names[n++] = copy;
    pthread_mutex_unlock(&nmu);
    return copy;
}

static const char *name_by_index(const char *op, const aclmdlDesc *modelDesc, size_t index) {
    int code;
    V *v = call(&code, op, "uu", H(modelDesc), (uint64_t)index);
    const char *out = v && v->t == 's' ? intern(v->s) : "";
    vfree(v);
    return out;
}
const char *aclmdlGetInputNameByIndex(const aclmdlDesc *modelDesc, size_t index) {
    return name_by_index("acl.mdl.get_input_name_by_index", modelDesc, index);
}
const char *aclmdlGetOutputNameByIndex(const aclmdlDesc *modelDesc, size_t index) {
    return name_by_index("acl.mdl.get_output_name_by_index", modelDesc, index);
}
aclError aclmdlGetInputIndexByName(const aclmdlDesc *modelDesc, const char *name, size_t *index) {
    NEED(index, "aclmdlGetInputIndexByName");
    OUT1(size_t, index, "acl.mdl.get_input_index_by_name", "us", H(modelDesc), name);
}
aclError aclmdlGetOutputIndexByName(const aclmdlDesc *modelDesc, const char *name, size_t *index) {
    NEED(index, "aclmdlGetOutputIndexByName");
    OUT1(size_t, index, "acl.mdl.get_output_index_by_name", "us", H(modelDesc), name);
}
aclDataType aclmdlGetInputDataType(const aclmdlDesc *modelDesc, size_t index) {
    int code;
    V *v = call(&code, "acl.mdl.get_input_data_type", "uu", H(modelDesc), (uint64_t)index);
    aclDataType out = is_int(v) ? (aclDataType)v->i : ACL_DT_UNDEFINED;
    vfree(v);
    return out;
}
aclDataType aclmdlGetOutputDataType(const aclmdlDesc *modelDesc, size_t index) {
    int code;
    V *v = call(&code, "acl.mdl.get_output_data_type", "uu", H(modelDesc), (uint64_t)index);
    aclDataType out = is_int(v) ? (aclDataType)v->i : ACL_DT_UNDEFINED;
    vfree(v);
    return out;
}
aclFormat aclmdlGetInputFormat(const aclmdlDesc *modelDesc, size_t index) {
    int code;
    V *v = call(&code, "acl.mdl.get_input_format", "uu", H(modelDesc), (uint64_t)index);
    aclFormat out = is_int(v) ? (aclFormat)v->i : ACL_FORMAT_UNDEFINED;
    vfree(v);
    return out;
}
aclFormat aclmdlGetOutputFormat(const aclmdlDesc *modelDesc, size_t index) {
    int code;
    V *v = call(&code, "acl.mdl.get_output_format", "uu", H(modelDesc), (uint64_t)index);
    aclFormat out = is_int(v) ? (aclFormat)v->i : ACL_FORMAT_UNDEFINED;
    vfree(v);
    return out;
}

aclError aclmdlGetDynamicBatch(const aclmdlDesc *modelDesc, aclmdlBatch *batch) {
    NEED(batch, "aclmdlGetDynamicBatch");
    int code;
    V *v = call(&code, "acl.mdl.get_dynamic_batch", "u", H(modelDesc));
    if (!v) return code;
    int r = ret_of(v);
    const V *m = item(v, 0);
    if (r == 0) {
        memset(batch, 0, sizeof *batch);
        V *list = get(m, "batch");
        if (is_seq(list)) {
            batch->batchCount = list->n < ACL_MAX_BATCH_NUM ? list->n : ACL_MAX_BATCH_NUM;
            for (size_t j = 0; j < batch->batchCount; j++)
                batch->batch[j] = is_int(list->a[j]) ? (uint64_t)list->a[j]->i : 0;
        }
    }
    vfree(v);
    return r;
}
aclError aclmdlGetDynamicHW(const aclmdlDesc *modelDesc, size_t index, aclmdlHW *hw) {
    NEED(hw, "aclmdlGetDynamicHW");
    int code;
    V *v = call(&code, "acl.mdl.get_dynamic_hw", "ui", H(modelDesc), (int64_t)index);
    if (!v) return code;
    int r = ret_of(v);
    const V *m = item(v, 0);
    if (r == 0) {
        memset(hw, 0, sizeof *hw);
        V *list = get(m, "hw");
        if (is_seq(list)) {
            hw->hwCount = list->n < ACL_MAX_HW_NUM ? list->n : ACL_MAX_HW_NUM;
            for (size_t j = 0; j < hw->hwCount; j++) {
                V *pair = list->a[j];
                hw->hw[j][0] = (uint64_t)int_at(pair, 0);
                hw->hw[j][1] = (uint64_t)int_at(pair, 1);
            }
        }
    }
    vfree(v);
    return r;
}
/* index is reserved (-1, that is SIZE_MAX in C): it travels as the signed value pyACL takes */
aclError aclmdlGetInputDynamicGearCount(const aclmdlDesc *modelDesc, size_t index,
                                        size_t *gearCount) {
    NEED(gearCount, "aclmdlGetInputDynamicGearCount");
    OUT1(size_t, gearCount, "acl.mdl.get_input_dynamic_gear_count", "ui", H(modelDesc),
         (int64_t)index);
}
aclError aclmdlGetInputDynamicDims(const aclmdlDesc *modelDesc, size_t index, aclmdlIODims *dims,
                                   size_t gearCount) {
    NEED(dims, "aclmdlGetInputDynamicDims");
    int code;
    V *v = call(&code, "acl.mdl.get_input_dynamic_dims", "uiu", H(modelDesc), (int64_t)index,
                (uint64_t)gearCount);
    if (!v) return code;
    int r = ret_of(v);
    const V *list = item(v, 0);
    if (r == 0 && is_seq(list))
        for (uint32_t j = 0; j < list->n && j < gearCount; j++) fill_dims(list->a[j], &dims[j]);
    vfree(v);
    return r;
}
aclError aclmdlSetDynamicBatchSize(uint32_t modelId, aclmdlDataset *dataset, size_t index,
                                   uint64_t batchSize) {
    STATUS("acl.mdl.set_dynamic_batch_size", "uuuu", (uint64_t)modelId, H(dataset),
           (uint64_t)index, batchSize);
}
aclError aclmdlSetDynamicHWSize(uint32_t modelId, aclmdlDataset *dataset, size_t index,
                                uint64_t height, uint64_t width) {
    STATUS("acl.mdl.set_dynamic_hw_size", "uuuuu", (uint64_t)modelId, H(dataset),
           (uint64_t)index, height, width);
}
aclError aclmdlSetInputDynamicDims(uint32_t modelId, aclmdlDataset *dataset, size_t index,
                                   const aclmdlIODims *dims) {
    STATUS("acl.mdl.set_input_dynamic_dims", "uuuM", (uint64_t)modelId, H(dataset),
           (uint64_t)index, dims);
}

aclmdlDataset *aclmdlCreateDataset(void) {
    return (aclmdlDataset *)(uintptr_t)bare("acl.mdl.create_dataset", "", 0, 0);
}
aclError aclmdlDestroyDataset(const aclmdlDataset *dataset) {
    STATUS("acl.mdl.destroy_dataset", "u", H(dataset));
}
aclError aclmdlAddDatasetBuffer(aclmdlDataset *dataset, aclDataBuffer *dataBuffer) {
    int code;
    V *v = call(&code, "acl.mdl.add_dataset_buffer", "uu", H(dataset), H(dataBuffer));
    return fin(code, v);        /* pyACL gives (dataset, ret): the code is the last item */
}
size_t aclmdlGetDatasetNumBuffers(const aclmdlDataset *dataset) {
    return (size_t)bare("acl.mdl.get_dataset_num_buffers", "u", H(dataset), 0);
}
aclDataBuffer *aclmdlGetDatasetBuffer(const aclmdlDataset *dataset, size_t index) {
    return (aclDataBuffer *)(uintptr_t)bare("acl.mdl.get_dataset_buffer", "uu", H(dataset),
                                            (uint64_t)index);
}

/* -- DVPP memory ------------------------------------------------------------------------------ */

aclError acldvppMalloc(void **devPtr, size_t size) {
    NEED(devPtr, "acldvppMalloc");
    OUT1(void *, devPtr, "acl.media.dvpp_malloc", "u", (uint64_t)size);
}
aclError acldvppFree(void *devPtr) { STATUS("acl.media.dvpp_free", "u", H(devPtr)); }

/* -- tensor descriptions -------------------------------------------------------------------- */

aclTensorDesc *aclCreateTensorDesc(aclDataType dataType, int numDims, const int64_t *dims,
                                   aclFormat format) {
    int code;
    V *v = call(&code, "acl.create_tensor_desc", "iLi", (int64_t)dataType, numDims, dims,
                (int64_t)format);
    aclTensorDesc *out = is_int(v) ? (aclTensorDesc *)(uintptr_t)v->i : NULL;
    vfree(v);
    return out;
}
void aclDestroyTensorDesc(const aclTensorDesc *desc) {
    int code;
    vfree(call(&code, "acl.destroy_tensor_desc", "u", H(desc)));
}
static int64_t desc_int(const char *op, const aclTensorDesc *desc, int64_t fallback) {
    int code;
    V *v = call(&code, op, "u", H(desc));
    int64_t out = is_int(v) ? v->i : fallback;
    vfree(v);
    return out;
}
aclDataType aclGetTensorDescType(const aclTensorDesc *desc) {
    return (aclDataType)desc_int("acl.get_tensor_desc_type", desc, ACL_DT_UNDEFINED);
}
aclFormat aclGetTensorDescFormat(const aclTensorDesc *desc) {
    return (aclFormat)desc_int("acl.get_tensor_desc_format", desc, ACL_FORMAT_UNDEFINED);
}
size_t aclGetTensorDescSize(const aclTensorDesc *desc) {
    return (size_t)desc_int("acl.get_tensor_desc_size", desc, 0);
}
size_t aclGetTensorDescElementCount(const aclTensorDesc *desc) {
    return (size_t)desc_int("acl.get_tensor_desc_element_count", desc, 0);
}
size_t aclGetTensorDescNumDims(const aclTensorDesc *desc) {
    return (size_t)desc_int("acl.get_tensor_desc_num_dims", desc, 0);
}
int64_t aclGetTensorDescDim(const aclTensorDesc *desc, size_t index) {
    int code;
    V *v = call(&code, "acl.get_tensor_desc_dim", "uu", H(desc), (uint64_t)index);
    int64_t out = is_int(v) ? v->i : -1;
    vfree(v);
    return out;
}
aclError aclGetTensorDescDimV2(const aclTensorDesc *desc, size_t index, int64_t *dimSize) {
    NEED(dimSize, "aclGetTensorDescDimV2");
    OUT1(int64_t, dimSize, "acl.get_tensor_desc_dim_v2", "uu", H(desc), (uint64_t)index);
}
void aclSetTensorDescName(aclTensorDesc *desc, const char *name) {
    int code;
    vfree(call(&code, "acl.set_tensor_desc_name", "us", H(desc), name));
}
const char *aclGetTensorDescName(aclTensorDesc *desc) {
    int code;
    V *v = call(&code, "acl.get_tensor_desc_name", "u", H(desc));
    const char *out = v && v->t == 's' ? intern(v->s) : "";
    vfree(v);
    return out;
}
aclError aclSetTensorFormat(aclTensorDesc *desc, aclFormat format) {
    STATUS("acl.set_tensor_format", "ui", H(desc), (int64_t)format);
}
aclError aclSetTensorShape(aclTensorDesc *desc, int numDims, const int64_t *dims) {
    STATUS("acl.set_tensor_shape", "uL", H(desc), numDims, dims);
}
aclError aclSetTensorOriginFormat(aclTensorDesc *desc, aclFormat format) {
    STATUS("acl.set_tensor_origin_format", "ui", H(desc), (int64_t)format);
}
aclError aclSetTensorOriginShape(aclTensorDesc *desc, int numDims, const int64_t *dims) {
    STATUS("acl.set_tensor_origin_shape", "uL", H(desc), numDims, dims);
}
aclError aclSetTensorConst(aclTensorDesc *desc, void *dataBuffer, size_t length) {
    uint64_t d = host_addr(dataBuffer, length);
    STATUS("acl.set_tensor_const", "uuu", H(desc), d, (uint64_t)length);
}
aclError aclSetTensorPlaceMent(aclTensorDesc *desc, aclMemType memType) {
    STATUS("acl.set_tensor_place_ment", "ui", H(desc), (int64_t)memType);
}

/* -- single operators ------------------------------------------------------------------------ */

aclopAttr *aclopCreateAttr(void) {
    return (aclopAttr *)(uintptr_t)bare("acl.op.create_attr", "", 0, 0);
}
void aclopDestroyAttr(const aclopAttr *attr) {
    int code;
    vfree(call(&code, "acl.op.destroy_attr", "u", H(attr)));
}
aclError aclopSetAttrBool(aclopAttr *attr, const char *attrName, uint8_t attrValue) {
    STATUS("acl.op.set_attr_bool", "usi", H(attr), attrName, (int64_t)attrValue);
}
aclError aclopSetAttrInt(aclopAttr *attr, const char *attrName, int64_t attrValue) {
    STATUS("acl.op.set_attr_int", "usi", H(attr), attrName, attrValue);
}
aclError aclopSetAttrFloat(aclopAttr *attr, const char *attrName, float attrValue) {
    STATUS("acl.op.set_attr_float", "usf", H(attr), attrName, (double)attrValue);
}
aclError aclopSetAttrString(aclopAttr *attr, const char *attrName, const char *attrValue) {
    STATUS("acl.op.set_attr_string", "uss", H(attr), attrName, attrValue);
}
aclError aclopSetAttrDataType(aclopAttr *attr, const char *attrName, aclDataType attrValue) {
    STATUS("acl.op.set_attr_data_type", "usi", H(attr), attrName, (int64_t)attrValue);
}
aclError aclopSetAttrListBool(aclopAttr *attr, const char *attrName, int numValues,
                              const uint8_t *values) {
    STATUS("acl.op.set_attr_list_bool", "usB", H(attr), attrName, numValues, values);
}
aclError aclopSetAttrListInt(aclopAttr *attr, const char *attrName, int numValues,
                             const int64_t *values) {
    STATUS("acl.op.set_attr_list_int", "usL", H(attr), attrName, numValues, values);
}
aclError aclopSetAttrListFloat(aclopAttr *attr, const char *attrName, int numValues,
                               const float *values) {
    STATUS("acl.op.set_attr_list_float", "usF", H(attr), attrName, numValues, values);
}
aclError aclopSetAttrListString(aclopAttr *attr, const char *attrName, int numValues,
                                const char **values) {
    STATUS("acl.op.set_attr_list_string", "usS", H(attr), attrName, numValues, values);
}
aclError aclopSetAttrListDataType(aclopAttr *attr, const char *attrName, int numValues,
                                  const aclDataType values[]) {
    STATUS("acl.op.set_attr_list_data_type", "usD", H(attr), attrName, numValues, values);
}
aclError aclopSetModelDir(const char *modelDir) {
    char buf[8192];
    STATUS("acl.op.set_model_dir", "s", server_path(modelDir, buf, sizeof buf));
}
aclError aclopExecuteV2(const char *opType, int numInputs, aclTensorDesc *inputDesc[],
                        aclDataBuffer *inputs[], int numOutputs, aclTensorDesc *outputDesc[],
                        aclDataBuffer *outputs[], aclopAttr *attr, aclrtStream stream) {
    STATUS("acl.op.execute_v2", "sHHHHuu", opType, numInputs, (const void *)inputDesc,
           numInputs, (const void *)inputs, numOutputs, (const void *)outputDesc, numOutputs,
           (const void *)outputs, H(attr), H(stream));
}
aclError aclopExecute(const char *opType, int numInputs, const aclTensorDesc *const inputDesc[],
                      const aclDataBuffer *const inputs[], int numOutputs,
                      const aclTensorDesc *const outputDesc[], aclDataBuffer *const outputs[],
                      const aclopAttr *attr, aclrtStream stream) {
    STATUS("acl.op.execute", "sHHHHuu", opType, numInputs, (const void *)inputDesc, numInputs,
           (const void *)inputs, numOutputs, (const void *)outputDesc, numOutputs,
           (const void *)outputs, H(attr), H(stream));
}
aclError aclopCreateHandle(const char *opType, int numInputs,
                           const aclTensorDesc *const inputDesc[], int numOutputs,
                           const aclTensorDesc *const outputDesc[], const aclopAttr *opAttr,
                           aclopHandle **handle) {
    NEED(handle, "aclopCreateHandle");
    OUT1(aclopHandle *, handle, "acl.op.create_handle", "sHHu", opType, numInputs,
         (const void *)inputDesc, numOutputs, (const void *)outputDesc, H(opAttr));
}
void aclopDestroyHandle(aclopHandle *handle) {
    int code;
    vfree(call(&code, "acl.op.destroy_handle", "u", H(handle)));
}
aclError aclopExecWithHandle(aclopHandle *handle, int numInputs,
                             const aclDataBuffer *const inputs[], int numOutputs,
                             aclDataBuffer *const outputs[], aclrtStream stream) {
    STATUS("acl.op.execute_with_handle", "uHHu", H(handle), numInputs, (const void *)inputs,
           numOutputs, (const void *)outputs, H(stream));
}
aclError aclopCast(const aclTensorDesc *srcDesc, const aclDataBuffer *srcBuffer,
                   const aclTensorDesc *dstDesc, aclDataBuffer *dstBuffer, uint8_t truncate,
                   aclrtStream stream) {
    STATUS("acl.op.cast", "uuuuiu", H(srcDesc), H(srcBuffer), H(dstDesc), H(dstBuffer),
           (int64_t)truncate, H(stream));
}

/* -- compiling single operators (acl_op_compiler.h): its own file ------------------------------ */

#include "op_compiler.c"

/* -- DVPP: picture descriptions, channels, VPC, JPEG ------------------------------------------ */

#define DVPP_HANDLE(T, op) return (T *)(uintptr_t)bare(op, "", 0, 0)

acldvppPicDesc *acldvppCreatePicDesc(void) { DVPP_HANDLE(acldvppPicDesc, "acl.media.dvpp_create_pic_desc"); }
aclError acldvppDestroyPicDesc(acldvppPicDesc *picDesc) {
    STATUS("acl.media.dvpp_destroy_pic_desc", "u", H(picDesc));
}
aclError acldvppSetPicDescData(acldvppPicDesc *picDesc, void *dataDev) {
    uint64_t d = host_addr(dataDev, 1);
    STATUS("acl.media.dvpp_set_pic_desc_data", "uu", H(picDesc), d);
}
#define PIC_SET(name, op) aclError name(acldvppPicDesc *picDesc, uint32_t value) { \
    STATUS(op, "uu", H(picDesc), (uint64_t)value); }
PIC_SET(acldvppSetPicDescSize, "acl.media.dvpp_set_pic_desc_size")
PIC_SET(acldvppSetPicDescWidth, "acl.media.dvpp_set_pic_desc_width")
PIC_SET(acldvppSetPicDescHeight, "acl.media.dvpp_set_pic_desc_height")
PIC_SET(acldvppSetPicDescWidthStride, "acl.media.dvpp_set_pic_desc_width_stride")
PIC_SET(acldvppSetPicDescHeightStride, "acl.media.dvpp_set_pic_desc_height_stride")
aclError acldvppSetPicDescFormat(acldvppPicDesc *picDesc, acldvppPixelFormat format) {
    STATUS("acl.media.dvpp_set_pic_desc_format", "ui", H(picDesc), (int64_t)format);
}
void *acldvppGetPicDescData(const acldvppPicDesc *picDesc) {
    return local_of((uint64_t)bare("acl.media.dvpp_get_pic_desc_data", "u", H(picDesc), 0));
}
#define PIC_GET(T, name, op) T name(const acldvppPicDesc *picDesc) { \
    return (T)bare(op, "u", H(picDesc), 0); }
PIC_GET(uint32_t, acldvppGetPicDescSize, "acl.media.dvpp_get_pic_desc_size")
PIC_GET(acldvppPixelFormat, acldvppGetPicDescFormat, "acl.media.dvpp_get_pic_desc_format")
PIC_GET(uint32_t, acldvppGetPicDescWidth, "acl.media.dvpp_get_pic_desc_width")
PIC_GET(uint32_t, acldvppGetPicDescHeight, "acl.media.dvpp_get_pic_desc_height")
PIC_GET(uint32_t, acldvppGetPicDescWidthStride, "acl.media.dvpp_get_pic_desc_width_stride")
PIC_GET(uint32_t, acldvppGetPicDescHeightStride, "acl.media.dvpp_get_pic_desc_height_stride")
PIC_GET(uint32_t, acldvppGetPicDescRetCode, "acl.media.dvpp_get_pic_desc_ret_code")

acldvppRoiConfig *acldvppCreateRoiConfig(uint32_t left, uint32_t right, uint32_t top,
                                         uint32_t bottom) {
    int code;
    V *v = call(&code, "acl.media.dvpp_create_roi_config", "uuuu", (uint64_t)left,
                (uint64_t)right, (uint64_t)top, (uint64_t)bottom);
    acldvppRoiConfig *out = is_int(v) ? (acldvppRoiConfig *)(uintptr_t)v->i : NULL;
    vfree(v);
    return out;
}
aclError acldvppDestroyRoiConfig(acldvppRoiConfig *roiConfig) {
    STATUS("acl.media.dvpp_destroy_roi_config", "u", H(roiConfig));
}
#define ROI_SET(Side, side) aclError acldvppSetRoiConfig##Side(acldvppRoiConfig *config, \
                                                     uint32_t value) { \
    STATUS("acl.media.dvpp_set_roi_config_" #side, "uu", H(config), (uint64_t)value); }
ROI_SET(Left, left)
ROI_SET(Right, right)
ROI_SET(Top, top)
ROI_SET(Bottom, bottom)
aclError acldvppSetRoiConfig(acldvppRoiConfig *config, uint32_t left, uint32_t right,
                             uint32_t top, uint32_t bottom) {
    STATUS("acl.media.dvpp_set_roi_config", "uuuuu", H(config), (uint64_t)left,
           (uint64_t)right, (uint64_t)top, (uint64_t)bottom);
}
acldvppResizeConfig *acldvppCreateResizeConfig(void) {
    DVPP_HANDLE(acldvppResizeConfig, "acl.media.dvpp_create_resize_config");
}
aclError acldvppDestroyResizeConfig(acldvppResizeConfig *resizeConfig) {
    STATUS("acl.media.dvpp_destroy_resize_config", "u", H(resizeConfig));
}
aclError acldvppSetResizeConfigInterpolation(acldvppResizeConfig *resizeConfig,
                                             uint32_t interpolation) {
    STATUS("acl.media.dvpp_set_resize_config_interpolation", "uu", H(resizeConfig),
           (uint64_t)interpolation);
}
uint32_t acldvppGetResizeConfigInterpolation(const acldvppResizeConfig *resizeConfig) {
    return (uint32_t)bare("acl.media.dvpp_get_resize_config_interpolation", "u",
                          H(resizeConfig), 0);
}
acldvppJpegeConfig *acldvppCreateJpegeConfig(void) {
    DVPP_HANDLE(acldvppJpegeConfig, "acl.media.dvpp_create_jpege_config");
}
aclError acldvppDestroyJpegeConfig(acldvppJpegeConfig *jpegeConfig) {
    STATUS("acl.media.dvpp_destroy_jpege_config", "u", H(jpegeConfig));
}
aclError acldvppSetJpegeConfigLevel(acldvppJpegeConfig *jpegeConfig, uint32_t level) {
    STATUS("acl.media.dvpp_set_jpege_config_level", "uu", H(jpegeConfig), (uint64_t)level);
}
acldvppChannelDesc *acldvppCreateChannelDesc(void) {
    DVPP_HANDLE(acldvppChannelDesc, "acl.media.dvpp_create_channel_desc");
}
aclError acldvppDestroyChannelDesc(acldvppChannelDesc *channelDesc) {
    STATUS("acl.media.dvpp_destroy_channel_desc", "u", H(channelDesc));
}
aclError acldvppCreateChannel(acldvppChannelDesc *channelDesc) {
    STATUS("acl.media.dvpp_create_channel", "u", H(channelDesc));
}
aclError acldvppDestroyChannel(acldvppChannelDesc *channelDesc) {
    STATUS("acl.media.dvpp_destroy_channel", "u", H(channelDesc));
}
aclError acldvppVpcResizeAsync(acldvppChannelDesc *channelDesc, acldvppPicDesc *inputDesc,
                               acldvppPicDesc *outputDesc, acldvppResizeConfig *resizeConfig,
                               aclrtStream stream) {
    STATUS("acl.media.dvpp_vpc_resize_async", "uuuuu", H(channelDesc), H(inputDesc),
           H(outputDesc), H(resizeConfig), H(stream));
}
aclError acldvppVpcCropAsync(acldvppChannelDesc *channelDesc, acldvppPicDesc *inputDesc,
                             acldvppPicDesc *outputDesc, acldvppRoiConfig *cropArea,
                             aclrtStream stream) {
    STATUS("acl.media.dvpp_vpc_crop_async", "uuuuu", H(channelDesc), H(inputDesc),
           H(outputDesc), H(cropArea), H(stream));
}
aclError acldvppVpcCropAndPasteAsync(acldvppChannelDesc *channelDesc, acldvppPicDesc *inputDesc,
                                     acldvppPicDesc *outputDesc, acldvppRoiConfig *cropArea,
                                     acldvppRoiConfig *pasteArea, aclrtStream stream) {
    STATUS("acl.media.dvpp_vpc_crop_and_paste_async", "uuuuuu", H(channelDesc), H(inputDesc),
           H(outputDesc), H(cropArea), H(pasteArea), H(stream));
}
aclError acldvppVpcCropResizeAsync(acldvppChannelDesc *channelDesc, acldvppPicDesc *inputDesc,
                                   acldvppPicDesc *outputDesc, acldvppRoiConfig *cropArea,
                                   acldvppResizeConfig *resizeConfig, aclrtStream stream) {
    STATUS("acl.media.dvpp_vpc_crop_resize_async", "uuuuuu", H(channelDesc), H(inputDesc),
           H(outputDesc), H(cropArea), H(resizeConfig), H(stream));
}
aclError acldvppVpcCropResizePasteAsync(acldvppChannelDesc *channelDesc,
                                        acldvppPicDesc *inputDesc, acldvppPicDesc *outputDesc,
                                        acldvppRoiConfig *cropArea, acldvppRoiConfig *pasteArea,
                                        acldvppResizeConfig *resizeConfig, aclrtStream stream) {
    STATUS("acl.media.dvpp_vpc_crop_resize_paste_async", "uuuuuuu", H(channelDesc),
           H(inputDesc), H(outputDesc), H(cropArea), H(pasteArea), H(resizeConfig),
           H(stream));
}

aclError acldvppJpegGetImageInfo(const void *data, uint32_t size, uint32_t *width,
                                 uint32_t *height, int32_t *components) {
    /* each out-parameter may be NULL: CANN's fills only those given */
    uint64_t d = host_addr(data, size);
    int code;
    V *v = call(&code, "acl.media.dvpp_jpeg_get_image_info", "uu", d, (uint64_t)size);
    if (!v) return code;
    int r = ret_of(v);
    if (r == 0) {
        if (width) *width = (uint32_t)int_at(v, 0);
        if (height) *height = (uint32_t)int_at(v, 1);
        if (components) *components = (int32_t)int_at(v, 2);
    }
    vfree(v);
    return r;
}
aclError acldvppJpegGetImageInfoV2(const void *data, uint32_t size, uint32_t *width,
                                   uint32_t *height, int32_t *components,
                                   acldvppJpegFormat *format) {
    /* each out-parameter may be NULL: CANN's fills only those given */
    uint64_t d = host_addr(data, size);
    int code;
    V *v = call(&code, "acl.media.dvpp_jpeg_get_image_info_v2", "uu", d, (uint64_t)size);
    if (!v) return code;
    int r = ret_of(v);
    if (r == 0) {
        if (width) *width = (uint32_t)int_at(v, 0);
        if (height) *height = (uint32_t)int_at(v, 1);
        if (components) *components = (int32_t)int_at(v, 2);
        if (format) *format = (acldvppJpegFormat)int_at(v, 3);
    }
    vfree(v);
    return r;
}
aclError acldvppJpegPredictDecSize(const void *data, uint32_t dataSize,
                                   acldvppPixelFormat outputPixelFormat, uint32_t *decSize) {
    NEED(decSize, "acldvppJpegPredictDecSize");
    uint64_t d = host_addr(data, dataSize);
    OUT1(uint32_t, decSize, "acl.media.dvpp_jpeg_predict_dec_size", "uui", d,
         (uint64_t)dataSize, (int64_t)outputPixelFormat);
}
aclError acldvppJpegPredictEncSize(const acldvppPicDesc *inputDesc,
                                   const acldvppJpegeConfig *config, uint32_t *size) {
    NEED(size, "acldvppJpegPredictEncSize");
    OUT1(uint32_t, size, "acl.media.dvpp_jpeg_predict_enc_size", "uu", H(inputDesc), H(config));
}
aclError acldvppJpegDecodeAsync(acldvppChannelDesc *channelDesc, const void *data, uint32_t size,
                                acldvppPicDesc *outputDesc, aclrtStream stream) {
    uint64_t d = host_addr(data, size);
    STATUS("acl.media.dvpp_jpeg_decode_async", "uuuuu", H(channelDesc), d, (uint64_t)size,
           H(outputDesc), H(stream));
}
/* size: the address of the uint32 that holds the buffer's size and receives the encoded
 * length when the task ends (acl.media takes the address, as the C function does). */
aclError acldvppJpegEncodeAsync(acldvppChannelDesc *channelDesc, acldvppPicDesc *inputDesc,
                                const void *data, uint32_t *size, acldvppJpegeConfig *config,
                                aclrtStream stream) {
    NEED(size, "acldvppJpegEncodeAsync");
    uint64_t s = host_addr(size, sizeof *size);
    STATUS("acl.media.dvpp_jpeg_encode_async", "uuuuuu", H(channelDesc), H(inputDesc), H(data),
           s, H(config), H(stream));
}

/* PNG decoding (PNGD): its own file */
#include "dvpp_png.c"

aclError acldvppSetPicDescRetCode(acldvppPicDesc *picDesc, uint32_t retCode) {
    STATUS("acl.media.dvpp_set_pic_desc_ret_code", "uu", H(picDesc), (uint64_t)retCode);
}

/* -- batch VPC ------------------------------------------------------------------------------ */

#define MAX_BATCH 256

acldvppBatchPicDesc *acldvppCreateBatchPicDesc(uint32_t batchSize) {
    return (acldvppBatchPicDesc *)(uintptr_t)bare("acl.media.dvpp_create_batch_pic_desc", "u",
                                                  (uint64_t)batchSize, 0);
}
acldvppPicDesc *acldvppGetPicDesc(acldvppBatchPicDesc *batchPicDesc, uint32_t index) {
    return (acldvppPicDesc *)(uintptr_t)bare("acl.media.dvpp_get_pic_desc", "uu",
                                             H(batchPicDesc), (uint64_t)index);
}
aclError acldvppDestroyBatchPicDesc(acldvppBatchPicDesc *batchPicDesc) {
    STATUS("acl.media.dvpp_destroy_batch_pic_desc", "u", H(batchPicDesc));
}

/* A batch call's lists: roiNums as read (size entries; past 256 entries, zeros without
 * reading them: pyACL refuses the count first), and the number of areas the arrays hold
 * (the sum of roiNums; none when the sum is past 256, which pyACL refuses first). */
static int batch_areas(const uint32_t *roiNums, uint32_t size, uint32_t **nums, int *count) {
    *nums = NULL;
    *count = 0;
    if (!roiNums) return 0;
    uint32_t n = size > 4096 ? 4096 : size;
    *nums = calloc(n ? n : 1, sizeof(uint32_t));
    if (!*nums) return -1;
    if (size > MAX_BATCH) { *count = (int)n; return 0; }
    uint64_t total = 0;
    for (uint32_t j = 0; j < size; j++) { (*nums)[j] = roiNums[j]; total += roiNums[j]; }
    *count = (int)size;
    return total <= MAX_BATCH ? (int)total : 0;
}

/* paste: 0 crop, 1 crop and paste, 2 crop and resize, 3 crop, resize and paste (the last
 * two with resizeConfig) */
static aclError batch_call(const char *op, const char *api, acldvppChannelDesc *channelDesc,
                           acldvppBatchPicDesc *src, uint32_t *roiNums, uint32_t size,
                           acldvppBatchPicDesc *dst, acldvppRoiConfig *cropAreas[],
                           acldvppRoiConfig *pasteAreas[], int paste,
                           acldvppResizeConfig *resizeConfig, aclrtStream stream) {
    uint32_t *nums;
    int count;
    int areas = batch_areas(roiNums, size, &nums, &count);
    if (areas < 0) {
        fail_here(api, ACL_ERROR_BAD_ALLOC, "out of host memory");
        return ACL_ERROR_BAD_ALLOC;
    }
    int code;
    /* a NULL roiNums is pyACL's None (TypeError: 100000); so is a NULL area array */
    int k = roiNums ? count : -1;
    V *v = paste == 1 ? call(&code, op, "uuUuHHu", H(channelDesc), H(src), k, (const void *)nums,
                             H(dst), areas, (const void *)cropAreas, areas,
                             (const void *)pasteAreas, H(stream))
         : paste == 2 ? call(&code, op, "uuUuHuu", H(channelDesc), H(src), k, (const void *)nums,
                             H(dst), areas, (const void *)cropAreas, H(resizeConfig), H(stream))
         : paste == 3 ? call(&code, op, "uuUuHHuu", H(channelDesc), H(src), k, (const void *)nums,
                             H(dst), areas, (const void *)cropAreas, areas,
                             (const void *)pasteAreas, H(resizeConfig), H(stream))
                      : call(&code, op, "uuUuHu", H(channelDesc), H(src), k, (const void *)nums,
                             H(dst), areas, (const void *)cropAreas, H(stream));
    free(nums);
    return fin(code, v);
}

aclError acldvppVpcBatchCropAsync(acldvppChannelDesc *channelDesc,
                                  acldvppBatchPicDesc *srcBatchPicDescs, uint32_t *roiNums,
                                  uint32_t size, acldvppBatchPicDesc *dstBatchPicDescs,
                                  acldvppRoiConfig *cropAreas[], aclrtStream stream) {
    return batch_call("acl.media.dvpp_vpc_batch_crop_async", "acldvppVpcBatchCropAsync",
                      channelDesc, srcBatchPicDescs, roiNums, size, dstBatchPicDescs, cropAreas,
                      NULL, 0, NULL, stream);
}
aclError acldvppVpcBatchCropResizeAsync(acldvppChannelDesc *channelDesc,
                                        acldvppBatchPicDesc *srcBatchPicDescs, uint32_t *roiNums,
                                        uint32_t size, acldvppBatchPicDesc *dstBatchPicDescs,
                                        acldvppRoiConfig *cropAreas[],
                                        acldvppResizeConfig *resizeConfig, aclrtStream stream) {
    return batch_call("acl.media.dvpp_vpc_batch_crop_resize_async",
                      "acldvppVpcBatchCropResizeAsync", channelDesc, srcBatchPicDescs, roiNums,
                      size, dstBatchPicDescs, cropAreas, NULL, 2, resizeConfig, stream);
}
aclError acldvppVpcBatchCropResizePasteAsync(acldvppChannelDesc *channelDesc,
                                             acldvppBatchPicDesc *srcBatchPicDescs,
                                             uint32_t *roiNums, uint32_t size,
                                             acldvppBatchPicDesc *dstBatchPicDescs,
                                             acldvppRoiConfig *cropAreas[],
                                             acldvppRoiConfig *pasteAreas[],
                                             acldvppResizeConfig *resizeConfig,
                                             aclrtStream stream) {
    return batch_call("acl.media.dvpp_vpc_batch_crop_resize_paste_async",
                      "acldvppVpcBatchCropResizePasteAsync", channelDesc, srcBatchPicDescs,
                      roiNums, size, dstBatchPicDescs, cropAreas, pasteAreas, 3, resizeConfig,
                      stream);
}
aclError acldvppVpcBatchCropAndPasteAsync(acldvppChannelDesc *channelDesc,
                                          acldvppBatchPicDesc *srcBatchPicDescs,
                                          uint32_t *roiNums, uint32_t size,
                                          acldvppBatchPicDesc *dstBatchPicDescs,
                                          acldvppRoiConfig *cropAreas[],
                                          acldvppRoiConfig *pasteAreas[], aclrtStream stream) {
    return batch_call("acl.media.dvpp_vpc_batch_crop_and_paste_async",
                      "acldvppVpcBatchCropAndPasteAsync", channelDesc, srcBatchPicDescs, roiNums,
                      size, dstBatchPicDescs, cropAreas, pasteAreas, 1, NULL, stream);
}

/* -- stream descriptions --------------------------------------------------------------------- */

acldvppStreamDesc *acldvppCreateStreamDesc(void) {
    DVPP_HANDLE(acldvppStreamDesc, "acl.media.dvpp_create_stream_desc");
}
aclError acldvppDestroyStreamDesc(acldvppStreamDesc *streamDesc) {
    STATUS("acl.media.dvpp_destroy_stream_desc", "u", H(streamDesc));
}
aclError acldvppSetStreamDescData(acldvppStreamDesc *streamDesc, void *dataDev) {
    uint64_t d = host_addr(dataDev, 1);
    STATUS("acl.media.dvpp_set_stream_desc_data", "uu", H(streamDesc), d);
}
#define STREAM_SET(name, T, op) aclError name(acldvppStreamDesc *streamDesc, T value) { \
    STATUS(op, "uu", H(streamDesc), (uint64_t)value); }
STREAM_SET(acldvppSetStreamDescSize, uint32_t, "acl.media.dvpp_set_stream_desc_size")
STREAM_SET(acldvppSetStreamDescTimestamp, uint64_t, "acl.media.dvpp_set_stream_desc_timestamp")
STREAM_SET(acldvppSetStreamDescRetCode, uint32_t, "acl.media.dvpp_set_stream_desc_ret_code")
STREAM_SET(acldvppSetStreamDescEos, uint8_t, "acl.media.dvpp_set_stream_desc_eos")
aclError acldvppSetStreamDescFormat(acldvppStreamDesc *streamDesc, acldvppStreamFormat format) {
    STATUS("acl.media.dvpp_set_stream_desc_format", "ui", H(streamDesc), (int64_t)format);
}
void *acldvppGetStreamDescData(const acldvppStreamDesc *streamDesc) {
    return local_of((uint64_t)bare("acl.media.dvpp_get_stream_desc_data", "u", H(streamDesc), 0));
}
#define STREAM_GET(T, name, op) T name(const acldvppStreamDesc *streamDesc) { \
    return (T)bare(op, "u", H(streamDesc), 0); }
STREAM_GET(uint32_t, acldvppGetStreamDescSize, "acl.media.dvpp_get_stream_desc_size")
STREAM_GET(acldvppStreamFormat, acldvppGetStreamDescFormat, "acl.media.dvpp_get_stream_desc_format")
STREAM_GET(uint64_t, acldvppGetStreamDescTimestamp, "acl.media.dvpp_get_stream_desc_timestamp")
STREAM_GET(uint32_t, acldvppGetStreamDescRetCode, "acl.media.dvpp_get_stream_desc_ret_code")
STREAM_GET(uint8_t, acldvppGetStreamDescEos, "acl.media.dvpp_get_stream_desc_eos")

/* -- VDEC and VENC channels ------------------------------------------------------------------ */

/* The report thread a channel description names: the program's pthread_t, by description (the
 * device knows the thread as its own server thread; the getters give the program's id back,
 * and creating the channel waits for the thread's first aclrtProcessReport, as
 * aclrtSubscribeReport does, so that the thread's prologue comes first on every run). */
typedef struct { uint64_t desc, tid, server; } ChannelThread;
static ChannelThread *chthreads;
static int nchthreads, capchthreads;

static void remember_thread(uint64_t desc, uint64_t tid, uint64_t server) {
    pthread_mutex_lock(&cmu);
    int j;
    for (j = 0; j < nchthreads && chthreads[j].desc != desc; j++) {}
    if (j == nchthreads) {
        if (nchthreads == capchthreads) {
            int cap = capchthreads ? 2 * capchthreads : 8;
            ChannelThread *p = realloc(chthreads, (size_t)cap * sizeof(ChannelThread));
            if (!p) { pthread_mutex_unlock(&cmu); return; }
            chthreads = p;
            capchthreads = cap;
        }
        nchthreads++;
    }
    chthreads[j] = (ChannelThread){desc, tid, server};
    pthread_mutex_unlock(&cmu);
}

/* The program's id of the thread the device knows as server (the id itself when unknown). */
static uint64_t program_thread(uint64_t desc, uint64_t server) {
    uint64_t out = server;
    pthread_mutex_lock(&cmu);
    for (int j = 0; j < nchthreads; j++)
        if (chthreads[j].desc == desc && chthreads[j].server == server) out = chthreads[j].tid;
    pthread_mutex_unlock(&cmu);
    return out;
}

static void forget_thread(uint64_t desc) {
    pthread_mutex_lock(&cmu);
    for (int j = 0; j < nchthreads; j++)
        if (chthreads[j].desc == desc) chthreads[j--] = chthreads[--nchthreads];
    pthread_mutex_unlock(&cmu);
}

static aclError destroy_desc(const char *op, const void *desc) {
    int code;
    V *v = call(&code, op, "u", H(desc));
    int r = fin(code, v);
    if (r == 0) forget_thread(H(desc));
    return r;
}

static void wait_channel_thread(uint64_t desc) {
    uint64_t tid = 0;
    pthread_mutex_lock(&cmu);
    for (int j = 0; j < nchthreads; j++)
        if (chthreads[j].desc == desc) tid = chthreads[j].tid;
    pthread_mutex_unlock(&cmu);
    if (tid && tid != (uint64_t)pthread_self()) wait_first_poll(tid);
}

static aclError set_thread(const char *op, const void *desc, uint64_t threadId) {
    uint64_t server = 0;
    if (threadId) {                      /* 0 is no thread: pyACL's own answer for it */
        int code = server_thread(threadId, &server);
        if (code) return code;
    }
    int code;
    V *v = call(&code, op, "uu", H(desc), server);
    int r = fin(code, v);
    if (r == 0) remember_thread(H(desc), threadId, server);
    return r;
}

static aclError set_callback(const char *op, const void *desc, void (*fn)(void), int kind) {
    int64_t id = fn ? callback_id(fn, NULL, kind) : 0;
    if (fn && !id) {
        fail_here(kind == CB_VDEC ? "aclvdecSetChannelDescCallback"
                                  : "aclvencSetChannelDescCallback",
                  ACL_ERROR_BAD_ALLOC, "out of host memory");
        return ACL_ERROR_BAD_ALLOC;
    }
    STATUS(op, "uc", H(desc), id);
}

/* The callback a getter's reply names (a client function of this program's), or NULL. */
static void (*get_callback(const char *op, const void *desc))(void) {
    int code;
    V *v = call(&code, op, "u", H(desc));
    V *fid = v && v->t == 'x' && v->s && strcmp(v->s, "cfn") == 0 ? get(v->a[0], "id") : NULL;
    Callback cb = callback_of(is_int(fid) ? fid->i : 0);
    vfree(v);
    return cb.fn;
}

#define DESC_SET(T, name, DT, op) aclError name(DT *channelDesc, T value) { \
    STATUS(op, "uu", H(channelDesc), (uint64_t)value); }
#define DESC_SET_ENUM(T, name, DT, op) aclError name(DT *channelDesc, T value) { \
    STATUS(op, "ui", H(channelDesc), (int64_t)value); }
#define DESC_GET(T, name, DT, op) T name(const DT *channelDesc) { \
    return (T)bare(op, "u", H(channelDesc), 0); }

/* VDEC */
aclvdecChannelDesc *aclvdecCreateChannelDesc(void) {
    DVPP_HANDLE(aclvdecChannelDesc, "acl.media.vdec_create_channel_desc");
}
aclError aclvdecDestroyChannelDesc(aclvdecChannelDesc *channelDesc) {
    return destroy_desc("acl.media.vdec_destroy_channel_desc", channelDesc);
}
DESC_SET(uint32_t, aclvdecSetChannelDescChannelId, aclvdecChannelDesc,
         "acl.media.vdec_set_channel_desc_channel_id")
aclError aclvdecSetChannelDescThreadId(aclvdecChannelDesc *channelDesc, uint64_t threadId) {
    return set_thread("acl.media.vdec_set_channel_desc_thread_id", channelDesc, threadId);
}
aclError aclvdecSetChannelDescCallback(aclvdecChannelDesc *channelDesc, aclvdecCallback callback) {
    return set_callback("acl.media.vdec_set_channel_desc_callback", channelDesc,
                        (void (*)(void))callback, CB_VDEC);
}
DESC_SET_ENUM(acldvppStreamFormat, aclvdecSetChannelDescEnType, aclvdecChannelDesc,
              "acl.media.vdec_set_channel_desc_entype")
DESC_SET_ENUM(acldvppPixelFormat, aclvdecSetChannelDescOutPicFormat, aclvdecChannelDesc,
              "acl.media.vdec_set_channel_desc_out_pic_format")
DESC_SET(uint32_t, aclvdecSetChannelDescOutPicWidth, aclvdecChannelDesc,
         "acl.media.vdec_set_channel_desc_out_pic_width")
DESC_SET(uint32_t, aclvdecSetChannelDescOutPicHeight, aclvdecChannelDesc,
         "acl.media.vdec_set_channel_desc_out_pic_height")
DESC_SET(uint32_t, aclvdecSetChannelDescRefFrameNum, aclvdecChannelDesc,
         "acl.media.vdec_set_channel_desc_ref_frame_num")
DESC_SET(uint32_t, aclvdecSetChannelDescOutMode, aclvdecChannelDesc,
         "acl.media.vdec_set_channel_desc_out_mode")
DESC_GET(uint32_t, aclvdecGetChannelDescChannelId, aclvdecChannelDesc,
         "acl.media.vdec_get_channel_desc_channel_id")
uint64_t aclvdecGetChannelDescThreadId(const aclvdecChannelDesc *channelDesc) {
    uint64_t server = (uint64_t)bare("acl.media.vdec_get_channel_desc_thread_id", "u",
                                     H(channelDesc), 0);
    return program_thread(H(channelDesc), server);
}
aclvdecCallback aclvdecGetChannelDescCallback(const aclvdecChannelDesc *channelDesc) {
    return (aclvdecCallback)get_callback("acl.media.vdec_get_channel_desc_callback", channelDesc);
}
DESC_GET(acldvppStreamFormat, aclvdecGetChannelDescEnType, aclvdecChannelDesc,
         "acl.media.vdec_get_channel_desc_entype")
DESC_GET(acldvppPixelFormat, aclvdecGetChannelDescOutPicFormat, aclvdecChannelDesc,
         "acl.media.vdec_get_channel_desc_out_pic_format")
DESC_GET(uint32_t, aclvdecGetChannelDescOutPicWidth, aclvdecChannelDesc,
         "acl.media.vdec_get_channel_desc_out_pic_width")
DESC_GET(uint32_t, aclvdecGetChannelDescOutPicHeight, aclvdecChannelDesc,
         "acl.media.vdec_get_channel_desc_out_pic_height")
DESC_GET(uint32_t, aclvdecGetChannelDescRefFrameNum, aclvdecChannelDesc,
         "acl.media.vdec_get_channel_desc_ref_frame_num")
DESC_GET(uint32_t, aclvdecGetChannelDescOutMode, aclvdecChannelDesc,
         "acl.media.vdec_get_channel_desc_out_mode")
aclvdecFrameConfig *aclvdecCreateFrameConfig(void) {
    DVPP_HANDLE(aclvdecFrameConfig, "acl.media.vdec_create_frame_config");
}
aclError aclvdecDestroyFrameConfig(aclvdecFrameConfig *vdecFrameConfig) {
    STATUS("acl.media.vdec_destroy_frame_config", "u", H(vdecFrameConfig));
}
aclError aclvdecCreateChannel(aclvdecChannelDesc *channelDesc) {
    wait_channel_thread(H(channelDesc));
    STATUS("acl.media.vdec_create_channel", "u", H(channelDesc));
}
aclError aclvdecDestroyChannel(aclvdecChannelDesc *channelDesc) {
    STATUS("acl.media.vdec_destroy_channel", "u", H(channelDesc));
}
aclError aclvdecSendFrame(aclvdecChannelDesc *channelDesc, acldvppStreamDesc *input,
                          acldvppPicDesc *output, aclvdecFrameConfig *config, void *userData) {
    STATUS("acl.media.vdec_send_frame", "uuuuu", H(channelDesc), H(input), H(output), H(config),
           H(userData));
}

/* VENC */
aclvencChannelDesc *aclvencCreateChannelDesc(void) {
    DVPP_HANDLE(aclvencChannelDesc, "acl.media.venc_create_channel_desc");
}
aclError aclvencDestroyChannelDesc(aclvencChannelDesc *channelDesc) {
    return destroy_desc("acl.media.venc_destroy_channel_desc", channelDesc);
}
aclError aclvencSetChannelDescThreadId(aclvencChannelDesc *channelDesc, uint64_t threadId) {
    return set_thread("acl.media.venc_set_channel_desc_thread_id", channelDesc, threadId);
}
aclError aclvencSetChannelDescCallback(aclvencChannelDesc *channelDesc, aclvencCallback callback) {
    return set_callback("acl.media.venc_set_channel_desc_callback", channelDesc,
                        (void (*)(void))callback, CB_VENC);
}
DESC_SET_ENUM(acldvppStreamFormat, aclvencSetChannelDescEnType, aclvencChannelDesc,
              "acl.media.venc_set_channel_desc_entype")
DESC_SET_ENUM(acldvppPixelFormat, aclvencSetChannelDescPicFormat, aclvencChannelDesc,
              "acl.media.venc_set_channel_desc_pic_format")
DESC_SET(uint32_t, aclvencSetChannelDescPicWidth, aclvencChannelDesc,
         "acl.media.venc_set_channel_desc_pic_width")
DESC_SET(uint32_t, aclvencSetChannelDescPicHeight, aclvencChannelDesc,
         "acl.media.venc_set_channel_desc_pic_height")
DESC_SET(uint32_t, aclvencSetChannelDescKeyFrameInterval, aclvencChannelDesc,
         "acl.media.venc_set_channel_desc_key_frame_interval")
DESC_SET(uint32_t, aclvencSetChannelDescBufSize, aclvencChannelDesc,
         "acl.media.venc_set_channel_desc_buf_size")
DESC_SET(uint32_t, aclvencSetChannelDescRcMode, aclvencChannelDesc,
         "acl.media.venc_set_channel_desc_rc_mode")
DESC_SET(uint32_t, aclvencSetChannelDescSrcRate, aclvencChannelDesc,
         "acl.media.venc_set_channel_desc_src_rate")
DESC_SET(uint32_t, aclvencSetChannelDescMaxBitRate, aclvencChannelDesc,
         "acl.media.venc_set_channel_desc_max_bit_rate")
uint64_t aclvencGetChannelDescThreadId(const aclvencChannelDesc *channelDesc) {
    uint64_t server = (uint64_t)bare("acl.media.venc_get_channel_desc_thread_id", "u",
                                     H(channelDesc), 0);
    return program_thread(H(channelDesc), server);
}
aclvencCallback aclvencGetChannelDescCallback(const aclvencChannelDesc *channelDesc) {
    return (aclvencCallback)get_callback("acl.media.venc_get_channel_desc_callback", channelDesc);
}
DESC_GET(acldvppStreamFormat, aclvencGetChannelDescEnType, aclvencChannelDesc,
         "acl.media.venc_get_channel_desc_entype")
DESC_GET(acldvppPixelFormat, aclvencGetChannelDescPicFormat, aclvencChannelDesc,
         "acl.media.venc_get_channel_desc_pic_format")
DESC_GET(uint32_t, aclvencGetChannelDescPicWidth, aclvencChannelDesc,
         "acl.media.venc_get_channel_desc_pic_width")
DESC_GET(uint32_t, aclvencGetChannelDescPicHeight, aclvencChannelDesc,
         "acl.media.venc_get_channel_desc_pic_height")
DESC_GET(uint32_t, aclvencGetChannelDescKeyFrameInterval, aclvencChannelDesc,
         "acl.media.venc_get_channel_desc_key_frame_interval")
DESC_GET(uint32_t, aclvencGetChannelDescBufSize, aclvencChannelDesc,
         "acl.media.venc_get_channel_desc_buf_size")
DESC_GET(uint32_t, aclvencGetChannelDescRcMode, aclvencChannelDesc,
         "acl.media.venc_get_channel_desc_rc_mode")
DESC_GET(uint32_t, aclvencGetChannelDescSrcRate, aclvencChannelDesc,
         "acl.media.venc_get_channel_desc_src_rate")
DESC_GET(uint32_t, aclvencGetChannelDescMaxBitRate, aclvencChannelDesc,
         "acl.media.venc_get_channel_desc_max_bit_rate")
aclvencFrameConfig *aclvencCreateFrameConfig(void) {
    DVPP_HANDLE(aclvencFrameConfig, "acl.media.venc_create_frame_config");
}
aclError aclvencDestroyFrameConfig(aclvencFrameConfig *config) {
    STATUS("acl.media.venc_destroy_frame_config", "u", H(config));
}
aclError aclvencSetFrameConfigForceIFrame(aclvencFrameConfig *config, uint8_t forceIFrame) {
    STATUS("acl.media.venc_set_frame_config_force_i_frame", "uu", H(config),
           (uint64_t)forceIFrame);
}
aclError aclvencSetFrameConfigEos(aclvencFrameConfig *config, uint8_t eos) {
    STATUS("acl.media.venc_set_frame_config_eos", "uu", H(config), (uint64_t)eos);
}
uint8_t aclvencGetFrameConfigForceIFrame(const aclvencFrameConfig *config) {
    return (uint8_t)bare("acl.media.venc_get_frame_config_force_i_frame", "u", H(config), 0);
}
uint8_t aclvencGetFrameConfigEos(const aclvencFrameConfig *config) {
    return (uint8_t)bare("acl.media.venc_get_frame_config_eos", "u", H(config), 0);
}
aclError aclvencCreateChannel(aclvencChannelDesc *channelDesc) {
    wait_channel_thread(H(channelDesc));
    STATUS("acl.media.venc_create_channel", "u", H(channelDesc));
}
aclError aclvencDestroyChannel(aclvencChannelDesc *channelDesc) {
    STATUS("acl.media.venc_destroy_channel", "u", H(channelDesc));
}
aclError aclvencSendFrame(aclvencChannelDesc *channelDesc, acldvppPicDesc *input, void *reserve,
                          aclvencFrameConfig *config, void *userData) {
    STATUS("acl.media.venc_send_frame", "uuuuu", H(channelDesc), H(input), H(reserve), H(config),
           H(userData));
}
