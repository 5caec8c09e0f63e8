/* test_attach_server.c — ddptop's side of `ddptop attach` (tui/attach/server.c) over an
 * inproc ROUTER, with DEALER viewers as `ddptop attach` makes them: the
 * snapshot a newcomer gets (order and bytes), forwarding, read-only
 * refusal, --control commands, the 16-viewer cap, forgetting the silent,
 * malformed and oversized frames. Every receive has a timeout.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <msgpack.h>
#include <zmq.h>

#include "check.h"
#include "wire/codec.h"
#include "wire/protocol.h"
#include "attach/server.h"
#include "net/zsock.h"

#define EP   "inproc://viewers-test"
#define MAXF 4096

typedef struct {
    unsigned char *data;
    size_t len;
} Frame;

/* What a viewer received: frames as bytes, and their kinds and ranks. */
typedef struct {
    int n;
    Frame f[MAXF];
    MsgKind kind[MAXF];
    int rank[MAXF];
    int64_t step[MAXF];
    char text[8][PROTO_STR_LONG]; /* texts of the first logs */
    int n_logs;
    int64_t ping_id; /* ddptop's last ping (not counted in n) */
    char level[8][PROTO_STR_SHORT];
} Got;

static Got got;

static void got_reset(Got *g)
{
    for (int i = 0; i < g->n; i++) free(g->f[i].data);
    memset(g, 0, sizeof *g);
}

static Frame frame_of(const Msg *m)
{
    CodecBuf b;
    char err[128];
    codec_buf_init(&b);
    if (codec_encode(m, &b, err, sizeof err)) fprintf(stderr, "encode: %s\n", err);
    Frame f = { malloc(b.len), b.len };
    memcpy(f.data, b.data, b.len);
    codec_buf_done(&b);
    return f;
}

static Frame hello(int rank, int world)
{
    Msg m;
    msg_init(&m, MSG_HELLO);
    m.rank = rank;
    m.u.hello.world = world;
    m.u.hello.pid = 1000 + rank;
    snprintf(m.u.hello.host, sizeof m.u.hello.host, "node%d", rank);
    return frame_of(&m);
}

static Frame phase(int rank, Phase p)
{
    Msg m;
    msg_init(&m, MSG_PHASE);
    m.rank = rank;
    m.u.phase.phase = p;
    return frame_of(&m);
}

static Frame step(int rank, int64_t s)
{
    Msg m;
    msg_init(&m, MSG_STEP);
    m.rank = rank;
    m.u.step.step = s;
    m.u.step.loss = 2.0 / (double)s;
    return frame_of(&m);
}

static Frame shard(int rank, uint32_t n, int64_t base)
{
    Msg m;
    msg_init(&m, MSG_SHARD);
    m.rank = rank;
    int64_t *idx = malloc((n ? n : 1) * sizeof *idx);
    for (uint32_t i = 0; i < n; i++) idx[i] = base + i;
    m.u.shard.idx = idx;
    m.u.shard.n_idx = n;
    m.u.shard.num_samples = n;
    Frame f = frame_of(&m);
    free(idx);
    return f;
}

static Frame simple(MsgKind k, int rank)
{
    Msg m;
    msg_init(&m, k);
    m.rank = rank;
    if (k == MSG_EVAL) {
        m.u.eval.epoch = 0;
        m.u.eval.step = 2;
        m.u.eval.accuracy = 0.5;
    }
    if (k == MSG_CKPT) {
        m.u.ckpt.step = 2;
        m.u.ckpt.ok = true;
    }
    if (k == MSG_SET) snprintf(m.u.store.key, sizeof m.u.store.key, "k");
    return frame_of(&m);
}

static void *dealer(void *ctx, const char *ident)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_ROUTING_ID, ident, strlen(ident));
    zmq_connect(s, EP);
    return s;
}

static void send_cmd(void *s, const char *op, int64_t id, int64_t arg)
{
    Msg m;
    CodecBuf b;
    char err[128];
    codec_buf_init(&b);
    msg_init(&m, MSG_CMD);
    snprintf(m.u.cmd.op, sizeof m.u.cmd.op, "%s", op);
    m.u.cmd.id = id;
    m.u.cmd.arg = arg;
    zs_send(s, &m, &b, 0, err, sizeof err);
    codec_buf_done(&b);
}

/* Read one message off the router (waiting up to 1 s) and hand it to
 * viewers_handle as the run loop (tui/run/peers.c) does. */
static ViewerAction route_one(Viewers *v, void *router, int64_t now_ms, char *who, size_t wholen)
{
    zmq_pollitem_t it = { router, 0, ZMQ_POLLIN, 0 };
    if (zmq_poll(&it, 1, 1000) <= 0) return (ViewerAction)-1;
    char ident[ZS_IDENT_MAX], err[160];
    size_t il = 0;
    Msg m;
    if (zs_recv_from(router, ident, &il, &m, 0, err, sizeof err) != 0) return (ViewerAction)-1;
    ViewerAction a = VIEWER_NONE;
    if (viewers_is_viewer_ident(ident, il)) a = viewers_handle(v, router, ident, il, &m, now_ms, who, wholen);
    msg_done(&m);
    return a;
}

/* A newcomer's way in: "attach", ddptop's ping back, and the "attach"
 * that answers it, which the caller then routes (route_one at its time). */
static void knock(Viewers *v, void *router, void *s, int64_t arg, int64_t now_ms)
{
    char who[96];
    send_cmd(s, "attach", 0, arg);
    route_one(v, router, now_ms, who, sizeof who);
    int64_t id = 0;
    zmq_pollitem_t it = { s, 0, ZMQ_POLLIN, 0 };
    if (zmq_poll(&it, 1, 1000) > 0) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        Msg m;
        char err[128];
        if (zmq_msg_recv(&msg, s, 0) >= 0 &&
            codec_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), &m, err, sizeof err) == 0) {
            if (m.kind == MSG_CMD && !strcmp(m.u.cmd.op, "ping")) id = m.u.cmd.id;
            msg_done(&m);
        }
        zmq_msg_close(&msg);
    }
    CHECK(id > 0, "no admission ping for a newcomer");
    send_cmd(s, "attach", id, arg);
}

/* Everything a viewer receives until `quiet_ms` pass with nothing, pumping
 * the viewers' queues as the run loop does. */
static void collect(Viewers *v, void *s, int quiet_ms, int64_t now_ms)
{
    got_reset(&got);
    int quiet = 0;
    while (quiet < quiet_ms) {
        viewers_tick(v, now_ms);
        zmq_pollitem_t it = { s, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll(&it, 1, 5) <= 0) {
            quiet += 5;
            continue;
        }
        quiet = 0;
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, s, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            continue;
        }
        if (got.n < MAXF) {
            size_t len = zmq_msg_size(&msg);
            Frame f = { malloc(len ? len : 1), len };
            memcpy(f.data, zmq_msg_data(&msg), len);
            Msg m;
            char err[128];
            int dec = codec_decode(f.data, f.len, &m, err, sizeof err);
            if (dec == 0 && m.kind == MSG_CMD && !strcmp(m.u.cmd.op, "ping")) {
                got.ping_id = m.u.cmd.id; /* liveness, not content */
                free(f.data);
                zmq_msg_close(&msg);
                continue;
            }
            int i = got.n++;
            got.f[i] = f;
            got.kind[i] = MSG_UNKNOWN;
            got.rank[i] = -9;
            got.step[i] = -1;
            if (dec == 0) {
                got.kind[i] = m.kind;
                got.rank[i] = m.rank;
                if (m.kind == MSG_STEP) got.step[i] = m.u.step.step;
                if (m.kind == MSG_LOG && got.n_logs < 8) {
                    snprintf(got.text[got.n_logs], sizeof got.text[0], "%s", m.u.log.text);
                    snprintf(got.level[got.n_logs], sizeof got.level[0], "%s", m.u.log.level);
                    got.n_logs++;
                }
                msg_done(&m);
            }
        }
        zmq_msg_close(&msg);
    }
}

static bool same(const Frame *a, const Frame *b) { return a->len == b->len && !memcmp(a->data, b->data, a->len); }

static int count_kind(MsgKind k)
{
    int n = 0;
    for (int i = 0; i < got.n; i++) n += got.kind[i] == k;
    return n;
}

static void test_idents(void)
{
    TEST_BEGIN("viewer_idents");
    CHECK(viewers_is_viewer_ident("view-12-ab", 10), "view- is a viewer");
    CHECK(!viewers_is_viewer_ident("rank-0", 6), "rank-0 is not");
    CHECK(!viewers_is_viewer_ident("view", 4), "too short");
    CHECK(!viewers_is_viewer_ident(NULL, 0), "NULL");
    CHECK(viewers_new(0) == NULL, "world 0");
    Viewers *v = NULL;
    viewers_free(&v); /* NULL is fine */
    TEST_END();
}

static void test_snapshot_and_forwarding(void *ctx, void *router)
{
    TEST_BEGIN("snapshot_order_content_and_forwarding");
    Viewers *v = viewers_new(2);
    CHECK(v != NULL, "viewers_new");
    /* a job under way: frames as the run loop's tap (tui/run/inbox.c) sees them, out of snapshot order */
    Frame fs[] = {
        hello(1, 2),         hello(0, 2),         phase(0, PHASE_TRAIN),
        shard(0, 8, 0),      step(0, 1),          phase(1, PHASE_TRAIN),
        step(1, 1),          step(0, 2),          simple(MSG_CKPT, 0),
        simple(MSG_EVAL, 0), simple(MSG_EVAL, 1), simple(MSG_COLL, 0),
        simple(MSG_BEAT, 1), simple(MSG_SET, 0),  simple(MSG_LOG, 1),
    };
    int nf = (int)(sizeof fs / sizeof fs[0]);
    for (int i = 0; i < nf; i++) viewers_on_frame(v, router, fs[i].data, fs[i].len);
    /* malformed frames are ignored: no crash, not kept */
    const unsigned char junk[] = { 0x82, 0xa1, 'v', 0x01, 0xa1, 'k', 0xa4, 's', 't', 'e' };
    viewers_on_frame(v, router, junk, sizeof junk);
    viewers_on_frame(v, router, "\xc1\xc1\xc1", 3);
    viewers_on_frame(v, router, "", 0);

    void *a = dealer(ctx, "view-100-aaaa");
    knock(v, router, a, 0, 1000);
    char who[96];
    CHECK(route_one(v, router, 1000, who, sizeof who) == VIEWER_NONE, "attach returns no action");
    CHECK(!strcmp(who, "viewer 1 (pid 100)"), "who \"%s\"", who);
    CHECK(viewers_count(v) == 1, "count %d", viewers_count(v));
    collect(v, a, 150, 1000);
    /* hellos (by rank), phases, shard, ckpt, the log line, one eval, steps
     * (round by round, oldest first), then ddptop's welcome */
    MsgKind want_k[] = { MSG_HELLO, MSG_HELLO, MSG_PHASE, MSG_PHASE, MSG_SHARD, MSG_CKPT,
                         MSG_LOG,   MSG_EVAL,  MSG_STEP,  MSG_STEP,  MSG_STEP,  MSG_LOG };
    int want_r[] = { 0, 1, 0, 1, 0, 0, 1, 0, 0, 0, 1, -1 };
    int64_t want_s[] = { -1, -1, -1, -1, -1, -1, -1, -1, 1, 2, 1, -1 };
    int nw = (int)(sizeof want_k / sizeof want_k[0]);
    CHECK(got.n == nw, "snapshot has %d frames, want %d", got.n, nw);
    for (int i = 0; i < nw && i < got.n; i++)
        CHECK(got.kind[i] == want_k[i] && got.rank[i] == want_r[i] && got.step[i] == want_s[i],
              "frame %d: kind %s rank %d step %lld, want %s rank %d step %lld", i, msg_kind_name(got.kind[i]),
              got.rank[i], (long long)got.step[i], msg_kind_name(want_k[i]), want_r[i], (long long)want_s[i]);
    /* byte for byte as received */
    if (got.n == nw) {
        CHECK(same(&got.f[0], &fs[1]) && same(&got.f[1], &fs[0]), "hellos are the frames received");
        CHECK(same(&got.f[4], &fs[3]), "shard bytes");
        CHECK(same(&got.f[9], &fs[7]), "step bytes");
        CHECK(same(&got.f[6], &fs[14]), "log bytes");
        CHECK(strstr(got.text[1], "viewer 1") && strstr(got.text[1], "read-only"), "welcome \"%s\"", got.text[1]);
    }

    /* later frames are forwarded as they come; store traffic and junk are not */
    Frame live[] = { step(1, 2), simple(MSG_COLL, 1), simple(MSG_SET, 1), simple(MSG_BEAT, 0) };
    for (int i = 0; i < 4; i++) viewers_on_frame(v, router, live[i].data, live[i].len);
    viewers_on_frame(v, router, junk, sizeof junk);
    collect(v, a, 100, 1000);
    CHECK(got.n == 3, "forwarded %d frames, want 3", got.n);
    if (got.n == 3)
        CHECK(same(&got.f[0], &live[0]) && same(&got.f[1], &live[1]) && same(&got.f[2], &live[3]),
              "forwarded frames in order, byte for byte");

    /* the once-a-second attach: no second snapshot */
    send_cmd(a, "attach", 0, 0);
    CHECK(route_one(v, router, 2000, who, sizeof who) == VIEWER_NONE, "refresh");
    collect(v, a, 100, 2000);
    CHECK(got.n == 0, "a refresh sent %d frames", got.n);

    /* a second viewer gets the snapshot as it is now: rank 1 at step 2 */
    void *b = dealer(ctx, "view-200-bbbb");
    knock(v, router, b, 0, 2000);
    route_one(v, router, 2000, who, sizeof who);
    CHECK(!strcmp(who, "viewer 2 (pid 200)"), "who \"%s\"", who);
    collect(v, b, 150, 2000);
    CHECK(count_kind(MSG_STEP) == 4 && count_kind(MSG_COLL) == 0 && count_kind(MSG_BEAT) == 0 &&
              count_kind(MSG_SET) == 0 && count_kind(MSG_HELLO) == 2,
          "second snapshot: %d steps, %d colls, %d beats, %d sets, %d hellos", count_kind(MSG_STEP),
          count_kind(MSG_COLL), count_kind(MSG_BEAT), count_kind(MSG_SET), count_kind(MSG_HELLO));
    CHECK(got.n > 0 && got.kind[got.n - 2] == MSG_STEP && got.rank[got.n - 2] == 1 && got.step[got.n - 2] == 2,
          "last step is rank 1's step 2");
    /* both get what comes next */
    Frame s3 = step(0, 3);
    viewers_on_frame(v, router, s3.data, s3.len);
    collect(v, a, 100, 2000);
    CHECK(got.n == 1 && same(&got.f[0], &s3), "viewer 1 got %d frames", got.n);
    collect(v, b, 100, 2000);
    CHECK(got.n == 1 && same(&got.f[0], &s3), "viewer 2 got %d frames", got.n);
    CHECK(viewers_drops(v) == 0, "drops %llu", (unsigned long long)viewers_drops(v));

    /* a rank's bye is in the snapshot; its new hello (a restart) clears it */
    Frame bye = simple(MSG_BYE, 1);
    viewers_on_frame(v, router, bye.data, bye.len);
    send_cmd(b, "detach", 0, 0);
    route_one(v, router, 2000, who, sizeof who);
    CHECK(viewers_count(v) == 1, "detach: count %d", viewers_count(v));
    void *c = dealer(ctx, "view-300-cccc");
    knock(v, router, c, 0, 2000);
    route_one(v, router, 2000, who, sizeof who);
    collect(v, c, 150, 2000);
    CHECK(count_kind(MSG_BYE) == 1 && got.n >= 2 && got.kind[got.n - 2] == MSG_BYE, "bye last in the snapshot");
    Frame h1 = hello(1, 2);
    viewers_on_frame(v, router, h1.data, h1.len);
    send_cmd(c, "detach", 0, 0);
    route_one(v, router, 2000, who, sizeof who);
    void *d = dealer(ctx, "view-400-dddd");
    knock(v, router, d, 0, 2000);
    route_one(v, router, 2000, who, sizeof who);
    collect(v, d, 150, 2000);
    CHECK(count_kind(MSG_BYE) == 0, "a restarted rank's old bye is gone");

    for (int i = 0; i < nf; i++) free(fs[i].data);
    for (int i = 0; i < 4; i++) free(live[i].data);
    free(s3.data);
    free(bye.data);
    free(h1.data);
    zmq_close(a);
    zmq_close(b);
    zmq_close(c);
    zmq_close(d);
    viewers_free(&v);
    CHECK(v == NULL, "free sets NULL");
    got_reset(&got);
    TEST_END();
}

/* The snapshot keeps a rank's steps in the same blobs (no malloc per step)
 * while nobody holds them, and never writes over a frame a viewer's queue
 * still holds: a newcomer's snapshot, queued behind its first burst, is
 * the steps as they were when it attached, byte for byte, then the newer
 * steps as forwarded. */
static void test_steps_kept_in_place(void *ctx, void *router)
{
    TEST_BEGIN("steps_kept_in_place_never_over_a_queued_frame");
    enum { WORLD = 64, RANKS = 16, KEEP = 2048 / WORLD, ROUNDS = 3 };
    Viewers *v = viewers_new(WORLD);
    static Frame old[KEEP][RANKS], cur[KEEP][RANKS];
    /* ROUNDS of KEEP steps each: every slot filled, then written over */
    for (int k = 0; k < ROUNDS * KEEP; k++)
        for (int r = 0; r < RANKS; r++) {
            Frame f = step(r, 1 + k);
            viewers_on_frame(v, router, f.data, f.len);
            if (k >= (ROUNDS - 1) * KEEP)
                old[k - (ROUNDS - 1) * KEEP][r] = f;
            else
                free(f.data);
        }
    uint64_t reused = viewers_reused(v);
    CHECK(reused == (uint64_t)(ROUNDS - 1) * KEEP * RANKS, "%llu steps kept in place, want %d",
          (unsigned long long)reused, (ROUNDS - 1) * KEEP * RANKS);
    void *a = dealer(ctx, "view-500-eeee");
    knock(v, router, a, 0, 1000);
    char who[96];
    route_one(v, router, 1000, who, sizeof who); /* the snapshot: 512 steps, 400 sent, the rest queued */
    for (int k = 0; k < KEEP; k++)
        for (int r = 0; r < RANKS; r++) {
            cur[k][r] = step(r, 1 + ROUNDS * KEEP + k);
            viewers_on_frame(v, router, cur[k][r].data, cur[k][r].len);
        }
    collect(v, a, 150, 1000);
    int want = 2 * KEEP * RANKS + 1, bad = 0; /* + the welcome line */
    CHECK(got.n == want, "got %d frames, want %d", got.n, want);
    for (int k = 0; k < KEEP && got.n == want; k++)
        for (int r = 0; r < RANKS; r++) {
            bad += !same(&got.f[k * RANKS + r], &old[k][r]);
            bad += !same(&got.f[KEEP * RANKS + 1 + k * RANKS + r], &cur[k][r]);
        }
    CHECK(bad == 0, "%d steps not the frames sent", bad);
    CHECK(viewers_reused(v) > reused, "steps already sent are kept in place again");
    for (int k = 0; k < KEEP; k++)
        for (int r = 0; r < RANKS; r++) {
            free(old[k][r].data);
            free(cur[k][r].data);
        }
    zmq_close(a);
    viewers_free(&v);
    got_reset(&got);
    TEST_END();
}

/* A step frame of about `size` bytes: a worker's step with a key this
 * build does not know ("pad", which decoders skip) padding it out, so
 * frames can grow past the room a kept blob has (their size rounded up to
 * 64) and shrink back. */
static Frame step_sized(int rank, int64_t s, size_t size)
{
    static char pad[1024];
    memset(pad, 'p', sizeof pad);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    const char *keys[] = { "v", "k", "r", "step", "loss", "pad" };
    msgpack_pack_map(&pk, 6);
    for (int i = 0; i < 6; i++) {
        msgpack_pack_str(&pk, strlen(keys[i]));
        msgpack_pack_str_body(&pk, keys[i], strlen(keys[i]));
        switch (i) {
        case 0: msgpack_pack_int(&pk, PROTO_VERSION); break;
        case 1:
            msgpack_pack_str(&pk, 4);
            msgpack_pack_str_body(&pk, "step", 4);
            break;
        case 2: msgpack_pack_int(&pk, rank); break;
        case 3: msgpack_pack_int64(&pk, s); break;
        case 4: msgpack_pack_double(&pk, 2.0 / (double)s); break;
        default: {
            size_t n = size > sb.size + 8 ? size - sb.size - 8 : 1;
            msgpack_pack_str(&pk, n < sizeof pad ? n : sizeof pad);
            msgpack_pack_str_body(&pk, pad, n < sizeof pad ? n : sizeof pad);
        }
        }
    }
    Frame f = { malloc(sb.size), sb.size };
    memcpy(f.data, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    return f;
}

/* What take_burst does with a step it let through: kept for the snapshot
 * from its decoded message (viewers_keep_msg), its frame passed on. */
static void take_step(Viewers *v, void *router, const Frame *f)
{
    Msg m;
    char err[128];
    if (codec_decode(f->data, f->len, &m, err, sizeof err)) {
        CHECK(false, "decode: %s", err);
        return;
    }
    viewers_keep_msg(v, f->data, f->len, &m);
    viewers_forward(v, router, f->data, f->len);
    msg_done(&m);
}

/* Steps kept the way take_burst keeps them (viewers_keep_msg, and
 * viewers_keep_msgs for several at once, which copy a step over its slot's
 * blob without keep()'s detour) are kept as
 * viewers_on_frame keeps them: in place exactly when the slot's blob is the
 * snapshot's alone and has room (frames that grow past it and shrink back),
 * and a newcomer's snapshot is the last steps byte for byte, never written
 * over while its queue holds them. */
static void test_steps_kept_by_keep_msg(void *ctx, void *router)
{
    TEST_BEGIN("steps_kept_by_keep_msg_as_by_on_frame");
    enum { WORLD = 64, RANKS = 16, KEEP = 2048 / WORLD, ROUNDS = 4 };
    Viewers *v = viewers_new(WORLD), *ref = viewers_new(WORLD);
    static Frame old[KEEP][RANKS], cur[KEEP][RANKS];
    int big = 0;
    for (int k = 0; k < ROUNDS * KEEP; k++) {
        Frame fs[RANKS];
        for (int r = 0; r < RANKS; r++) {
            /* sizes that move a slot's frame past its blob's room and back */
            size_t size = (k / 3 + r) % 4 == 0 ? 300 + (size_t)(k % 5) * 70 : 60 + (size_t)(k % 3) * 20;
            fs[r] = step_sized(r, 1 + k, size);
            big += size > 128;
            viewers_on_frame(ref, router, fs[r].data, fs[r].len);
        }
        if (k % 2) { /* one message at a time, or a round of them in one call (viewers_keep_msgs) */
            for (int r = 0; r < RANKS; r++) take_step(v, router, &fs[r]);
        } else {
            const void *data[RANKS];
            size_t lens[RANKS];
            Msg ms[RANKS];
            char err[128];
            for (int r = 0; r < RANKS; r++) {
                data[r] = fs[r].data;
                lens[r] = fs[r].len;
                if (codec_decode(fs[r].data, fs[r].len, &ms[r], err, sizeof err)) CHECK(false, "decode: %s", err);
            }
            viewers_keep_msgs(v, data, lens, ms, RANKS);
            for (int r = 0; r < RANKS; r++) msg_done(&ms[r]);
        }
        for (int r = 0; r < RANKS; r++) {
            if (k >= (ROUNDS - 1) * KEEP)
                old[k - (ROUNDS - 1) * KEEP][r] = fs[r];
            else
                free(fs[r].data);
        }
    }
    uint64_t reused = viewers_reused(v), total = (uint64_t)ROUNDS * KEEP * RANKS;
    CHECK(reused == viewers_reused(ref), "%llu steps kept in place, viewers_on_frame's way %llu",
          (unsigned long long)reused, (unsigned long long)viewers_reused(ref));
    CHECK(reused > total / 4 && reused < total - (uint64_t)KEEP * RANKS - 100 && big > 0,
          "%llu of %llu in place: the sizes do not exercise both ways", (unsigned long long)reused,
          (unsigned long long)total);
    void *a = dealer(ctx, "view-501-ffff");
    knock(v, router, a, 0, 1000);
    char who[96];
    route_one(v, router, 1000, who, sizeof who); /* the snapshot: 400 sent, the rest queued */
    for (int k = 0; k < KEEP; k++)
        for (int r = 0; r < RANKS; r++) {
            cur[k][r] = step_sized(r, 1 + ROUNDS * KEEP + k, (k + r) % 2 ? 80 : 500);
            take_step(v, router, &cur[k][r]);
        }
    collect(v, a, 150, 1000);
    int want = 2 * KEEP * RANKS + 1, bad = 0; /* + the welcome line */
    CHECK(got.n == want, "got %d frames, want %d", got.n, want);
    for (int k = 0; k < KEEP && got.n == want; k++)
        for (int r = 0; r < RANKS; r++) {
            bad += !same(&got.f[k * RANKS + r], &old[k][r]);
            bad += !same(&got.f[KEEP * RANKS + 1 + k * RANKS + r], &cur[k][r]);
        }
    CHECK(bad == 0, "%d steps not the frames sent", bad);
    /* a message the snapshot does not hold leaves it as it was */
    uint64_t before = viewers_reused(v);
    Msg m;
    msg_init(&m, MSG_COLL);
    m.rank = 3;
    Frame c = frame_of(&m);
    viewers_keep_msg(v, c.data, c.len, &m);
    CHECK(viewers_reused(v) == before, "a coll was kept");
    free(c.data);
    for (int k = 0; k < KEEP; k++)
        for (int r = 0; r < RANKS; r++) {
            free(old[k][r].data);
            free(cur[k][r].data);
        }
    zmq_close(a);
    viewers_free(&v);
    viewers_free(&ref);
    got_reset(&got);
    TEST_END();
}

static void test_commands(void *ctx, void *router)
{
    TEST_BEGIN("read_only_refused_control_applied");
    Viewers *v = viewers_new(1);
    Frame h = hello(0, 1);
    viewers_on_frame(v, router, h.data, h.len);
    char who[96];
    void *ro = dealer(ctx, "view-10-ro"), *ctl = dealer(ctx, "view-11-ctl");

    /* a command before attaching: refused with a word */
    send_cmd(ro, "ckpt", 1, 0);
    CHECK(route_one(v, router, 0, who, sizeof who) == VIEWER_NONE, "unattached ckpt");
    collect(v, ro, 100, 0);
    CHECK(got.n_logs == 1 && !strcmp(got.level[0], "warn") && strstr(got.text[0], "attach"), "unattached: \"%s\"",
          got.text[0]);

    knock(v, router, ro, 0, 0);
    route_one(v, router, 0, who, sizeof who);
    knock(v, router, ctl, 1, 0);
    route_one(v, router, 0, who, sizeof who);
    collect(v, ro, 100, 0);
    collect(v, ctl, 100, 0);
    CHECK(got.n_logs == 1 && strstr(got.text[0], "--control"), "control welcome \"%s\"", got.text[0]);

    const char *ops[] = { "ckpt", "stop", "pause", "abort" };
    ViewerAction acts[] = { VIEWER_CKPT, VIEWER_STOP, VIEWER_PAUSE, VIEWER_ABORT };
    for (int i = 0; i < 4; i++) {
        send_cmd(ro, ops[i], 1, 0);
        ViewerAction a = route_one(v, router, 100, who, sizeof who);
        CHECK(a == VIEWER_NONE, "read-only %s returned %d", ops[i], (int)a);
        collect(v, ro, 100, 100);
        CHECK(got.n == 1 && got.n_logs == 1 && !strcmp(got.level[0], "warn") &&
                  strstr(got.text[0], "read-only viewer") && strstr(got.text[0], "ddptop attach --control") &&
                  strstr(got.text[0], ops[i]),
              "read-only %s: %d frames, \"%s\" (%s)", ops[i], got.n, got.text[0], got.level[0]);
        send_cmd(ctl, ops[i], 1, 0);
        a = route_one(v, router, 100, who, sizeof who);
        CHECK(a == acts[i], "--control %s returned %d", ops[i], (int)a);
        CHECK(!strcmp(who, "viewer 2 (pid 11)"), "who \"%s\"", who);
    }
    /* the same command id again is a repeat; the next id acts */
    send_cmd(ctl, "ckpt", 1, 0);
    CHECK(route_one(v, router, 100, who, sizeof who) == VIEWER_NONE, "repeated ckpt id 1");
    send_cmd(ctl, "ckpt", 2, 0);
    CHECK(route_one(v, router, 100, who, sizeof who) == VIEWER_CKPT, "ckpt id 2");
    /* unknown ops are skipped */
    send_cmd(ctl, "fault", 1, 0);
    CHECK(route_one(v, router, 100, who, sizeof who) == VIEWER_NONE, "fault from a viewer");
    collect(v, ctl, 100, 100);
    CHECK(got.n == 0, "--control commands get no reply (%d frames)", got.n);

    /* stacks changes nothing: a read-only viewer may ask; the answer is log
     * lines to that viewer alone, in order (tui/run/stacks.c sends them) */
    send_cmd(ro, "stacks", 1, 1);
    CHECK(route_one(v, router, 100, who, sizeof who) == VIEWER_STACKS, "read-only stacks");
    send_cmd(ro, "stacks", 1, 1);
    CHECK(route_one(v, router, 100, who, sizeof who) == VIEWER_NONE, "repeated stacks id 1");
    CHECK(viewers_tell(v, router, "view-10-ro", 10, "stacks", "{\"world\":1,") == 0 &&
              viewers_tell(v, router, "view-10-ro", 10, "stacks", "\"nodes\":[]}") == 0 &&
              viewers_tell(v, router, "view-10-ro", 10, "stacks-end", "1 ranks, 1 stacks") == 0,
          "tell an attached viewer");
    CHECK(viewers_tell(v, router, "view-12-no", 10, "stacks", "x") == -1, "tell a viewer that is not attached");
    collect(v, ro, 100, 100);
    CHECK(got.n == 3 && got.n_logs == 3 && !strcmp(got.level[0], "stacks") && !strcmp(got.text[0], "{\"world\":1,") &&
              !strcmp(got.text[1], "\"nodes\":[]}") && !strcmp(got.level[2], "stacks-end"),
          "stacks answer: %d frames, first \"%s\" (%s)", got.n, got.text[0], got.level[0]);
    collect(v, ctl, 100, 100);
    CHECK(got.n == 0, "the other viewer got the answer too (%d frames)", got.n);

    /* a read-only viewer that comes back with --control: mode and snapshot again */
    send_cmd(ro, "attach", 0, 1);
    route_one(v, router, 200, who, sizeof who);
    collect(v, ro, 100, 200);
    CHECK(count_kind(MSG_HELLO) == 1, "snapshot again on a mode change (%d hellos)", count_kind(MSG_HELLO));
    send_cmd(ro, "stop", 2, 0);
    CHECK(route_one(v, router, 200, who, sizeof who) == VIEWER_STOP, "now --control");

    free(h.data);
    zmq_close(ro);
    zmq_close(ctl);
    viewers_free(&v);
    got_reset(&got);
    TEST_END();
}

static void test_cap_and_timeout(void *ctx, void *router)
{
    TEST_BEGIN("seventeenth_refused_silent_forgotten");
    Viewers *v = viewers_new(1);
    Frame h = hello(0, 1);
    viewers_on_frame(v, router, h.data, h.len);
    void *s[17];
    char who[96];
    for (int i = 0; i < 17; i++) {
        char id[32];
        snprintf(id, sizeof id, "view-%d-x", 500 + i);
        s[i] = dealer(ctx, id);
        if (i < 16)
            knock(v, router, s[i], 0, i < 8 ? 0 : 3000);
        else
            send_cmd(s[i], "attach", 0, 0);
        route_one(v, router, i < 8 ? 0 : 3000, who, sizeof who);
        if (i < 16) collect(v, s[i], 30, i < 8 ? 0 : 3000); /* its snapshot */
    }
    CHECK(viewers_count(v) == 16, "count %d", viewers_count(v));
    CHECK(!strcmp(who, "viewer (pid 516)"), "17th who \"%s\"", who);
    collect(v, s[16], 100, 3000);
    CHECK(got.n == 1 && count_kind(MSG_HELLO) == 0 && got.n_logs == 1 && !strcmp(got.level[0], "warn") &&
              strstr(got.text[0], "refused"),
          "17th: %d frames, \"%s\"", got.n, got.text[0]);
    /* the first eight were last heard at 0 ms, the others at 3000 ms */
    CHECK(viewers_tick(v, 5999) == 16, "nobody silent 6 s yet");
    CHECK(viewers_tick(v, 6001) == 8, "the silent eight forgotten: %d left", viewers_count(v));
    /* forgotten viewers get nothing more; the others do */
    Frame st = step(0, 7);
    viewers_on_frame(v, router, st.data, st.len);
    collect(v, s[0], 100, 6001);
    CHECK(got.n == 0, "forgotten viewer got %d frames", got.n);
    collect(v, s[8], 100, 6001);
    CHECK(got.n == 1 && got.kind[0] == MSG_STEP, "remaining viewer got %d frames", got.n);
    /* now there is room: the 17th gets in */
    knock(v, router, s[16], 0, 6001);
    route_one(v, router, 6001, who, sizeof who);
    CHECK(viewers_count(v) == 9, "count %d", viewers_count(v));
    CHECK(viewers_tick(v, 9002) == 1, "all but the newest forgotten: %d", viewers_count(v));
    for (int i = 0; i < 17; i++) zmq_close(s[i]);
    free(h.data);
    free(st.data);
    viewers_free(&v);
    got_reset(&got);
    TEST_END();
}

/* 16 viewers that re-send "attach" every second but never read once held
 * every slot for good and locked out the real `ddptop attach`. Now a peer
 * that never answers a ping never gets a slot, one that stops answering
 * loses its slot 6 s after its last answer (re-sending "attach" or forging
 * an answer does not help), and one that answers stays. */
static void test_blind_viewers_expire(void *ctx, void *router)
{
    TEST_BEGIN("viewers_that_do_not_answer_pings_get_no_slot_and_lose_theirs");
    Viewers *v = viewers_new(1);
    Frame h = hello(0, 1);
    viewers_on_frame(v, router, h.data, h.len);
    void *blind[16];
    char who[96];
    for (int i = 0; i < 16; i++) {
        char id[32];
        snprintf(id, sizeof id, "view-%d-blind", 700 + i);
        blind[i] = dealer(ctx, id);
    }
    void *real = dealer(ctx, "view-999-real"), *lapsed = dealer(ctx, "view-998-lapsed");
    for (int64_t t = 0; t <= 12000; t += 1000) {
        for (int i = 0; i < 16; i++) {
            send_cmd(blind[i], "attach", 0, 0);
            route_one(v, router, t, who, sizeof who);
            send_cmd(blind[i], "attach", 12345 + t, 0); /* a guessed answer */
            route_one(v, router, t, who, sizeof who);
        }
        viewers_tick(v, t);
    }
    CHECK(viewers_count(v) == 0, "%d blind viewers got a slot", viewers_count(v));
    /* the real one gets in at once, with its snapshot */
    knock(v, router, real, 0, 12000);
    route_one(v, router, 12000, who, sizeof who);
    collect(v, real, 50, 12000);
    CHECK(viewers_count(v) == 1 && count_kind(MSG_HELLO) == 1, "the real viewer: %d attached, %d hellos",
          viewers_count(v), count_kind(MSG_HELLO));
    knock(v, router, lapsed, 0, 12000);
    route_one(v, router, 12000, who, sizeof who);
    CHECK(viewers_count(v) == 2, "count %d", viewers_count(v));
    for (int64_t t = 13000; t <= 24000; t += 1000) {
        got.ping_id = 0;
        collect(v, real, 20, t); /* the tick at t pings it */
        CHECK(got.ping_id > 0, "no ping for the real viewer at %lld ms", (long long)t);
        send_cmd(real, "attach", got.ping_id, 0);
        route_one(v, router, t, who, sizeof who);
        /* the lapsed one keeps saying attach, with no (or a forged) answer */
        send_cmd(lapsed, "attach", t == 13000 ? 0 : 777, 0);
        route_one(v, router, t, who, sizeof who);
        int n = viewers_tick(v, t);
        if (t == 18000) CHECK(n == 2, "forgotten before 6 s without an answer: %d", n);
        if (t == 19000) CHECK(n == 1, "the lapsed viewer kept its slot: %d attached", n);
    }
    CHECK(viewers_count(v) == 1, "the answering viewer was forgotten: %d", viewers_count(v));
    for (int i = 0; i < 16; i++) zmq_close(blind[i]);
    zmq_close(real);
    zmq_close(lapsed);
    free(h.data);
    viewers_free(&v);
    got_reset(&got);
    TEST_END();
}

/* A snapshot bigger than a ROUTER pipe (1000 messages by default, which
 * the ROUTER drops past, silently) arrives whole; a shard over 1 MiB is
 * forwarded but not kept. Over ipc://, as ddptop runs: a viewer like
 * `ddptop attach` (a deep receive queue) behind libzmq's I/O threads. */
static void *ipc_dealer(void *ctx, const char *ident, const char *ep)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, hwm = 200000;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_ROUTING_ID, ident, strlen(ident));
    zmq_connect(s, ep);
    return s;
}

static void test_big(void *ctx)
{
    TEST_BEGIN("large_snapshot_in_bursts_big_shard_skipped");
    char dir[256], ep[300], err[256];
    if (zs_private_dir(dir, sizeof dir, err, sizeof err)) {
        CHECK(0, "private dir: %s", err);
        TEST_END();
        return;
    }
    snprintf(ep, sizeof ep, "ipc://%s/ctl", dir);
    void *router = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    viewers_setup_router(router); /* as ddptop's ctl */
    CHECK(zmq_bind(router, ep) == 0, "bind %s: %s", ep, zmq_strerror(zmq_errno()));
    int world = 64;
    Viewers *v = viewers_new(world);
    int frames = 0;
    for (int r = 0; r < world; r++) {
        Frame f[3] = { hello(r, world), phase(r, PHASE_TRAIN), shard(r, 100, r * 100) };
        for (int k = 0; k < 3; k++) {
            viewers_on_frame(v, router, f[k].data, f[k].len);
            free(f[k].data);
            frames++;
        }
    }
    for (int s = 1; s <= 40; s++)
        for (int r = 0; r < world; r++) {
            Frame f = step(r, s);
            viewers_on_frame(v, router, f.data, f.len);
            free(f.data);
        }
    int keep = 2048 / world; /* steps kept per rank (viewers.c) */
    void *a = ipc_dealer(ctx, "view-1-big", ep);
    char who[96];
    knock(v, router, a, 0, 0);
    route_one(v, router, 0, who, sizeof who);
    collect(v, a, 200, 0);
    CHECK(got.n == frames + world * keep + 1, "got %d frames, want %d", got.n, frames + world * keep + 1);
    CHECK(count_kind(MSG_STEP) == world * keep, "%d steps", count_kind(MSG_STEP));
    bool order = true;
    for (int i = 1; i < got.n; i++)
        if (got.kind[i] == MSG_STEP && got.kind[i - 1] == MSG_STEP && got.step[i] < got.step[i - 1]) order = false;
    CHECK(order, "steps oldest first");
    CHECK(got.n > 0 && got.kind[got.n - 1] == MSG_LOG, "welcome last");

    /* a shard of 300k indices (> 1 MiB): the attached viewer gets it, a
     * newcomer does not (it has the old one) */
    Frame big = shard(5, 300000, 1000000);
    CHECK(big.len > (1u << 20), "big shard is %zu bytes", big.len);
    viewers_on_frame(v, router, big.data, big.len);
    collect(v, a, 200, 0);
    CHECK(got.n == 1 && same(&got.f[0], &big), "big shard forwarded (%d frames)", got.n);
    void *b = ipc_dealer(ctx, "view-2-big", ep);
    knock(v, router, b, 0, 0);
    route_one(v, router, 0, who, sizeof who);
    collect(v, b, 200, 0);
    int shards = 0;
    bool big_there = false;
    for (int i = 0; i < got.n; i++)
        if (got.kind[i] == MSG_SHARD) {
            shards++;
            big_there |= same(&got.f[i], &big);
        }
    CHECK(shards == world && !big_there, "%d shards in the snapshot, big one %s", shards,
          big_there ? "kept" : "skipped");
    free(big.data);
    zmq_close(a);
    zmq_close(b);
    zmq_close(router);
    zs_private_dir_remove(dir);
    viewers_free(&v);
    got_reset(&got);
    TEST_END();
}

int main(void)
{
    void *ctx = zmq_ctx_new();
    void *router = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_bind(router, EP)) {
        printf("FAIL: %s:bind: %s\n", __FILE__, zmq_strerror(zmq_errno()));
        return 1;
    }
    test_idents();
    test_snapshot_and_forwarding(ctx, router);
    test_steps_kept_in_place(ctx, router);
    test_steps_kept_by_keep_msg(ctx, router);
    test_commands(ctx, router);
    test_cap_and_timeout(ctx, router);
    test_blind_viewers_expire(ctx, router);
    test_big(ctx);
    zmq_close(router);
    zmq_ctx_term(ctx);
    CHECK_EXIT();
}
