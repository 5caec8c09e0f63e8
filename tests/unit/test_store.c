/* test_store.c — the rendezvous store (tui/run/store.h) on an inproc
 * ROUTER, with a DEALER as the one peer that reads every reply.
 *
 * Many keys and many waiters (past the arrays' first growth), a set that
 * wakes every waiter of its key, a wait that times out, and refusals that
 * are still answered (ok=false). Every receive has a timeout, so a broken
 * build fails instead of hanging.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <zmq.h>

#include "check.h"
#include "net/zsock.h"
#include "run/store.h"
#include "wire/codec.h"
#include "wire/protocol.h"

static Msg req(MsgKind kind, const char *key, const void *val, uint32_t val_len, int64_t timeout_ms)
{
    Msg m;
    msg_init(&m, kind);
    snprintf(m.u.store.key, sizeof m.u.store.key, "%s", key);
    m.u.store.val = (uint8_t *)val; /* borrowed: never msg_done'd */
    m.u.store.val_len = val_len;
    m.u.store.timeout_ms = timeout_ms;
    return m;
}

static char last_error[PROTO_STR_MED]; /* the last reply's "error" */

/* The peer's next reply: 1 ok, 0 refused or timed out, -1 none came. */
static int next_reply(void *dealer, char *key, size_t key_len, char *val, size_t val_len)
{
    Msg m;
    char err[256];
    if (zs_recv(dealer, &m, 0, err, sizeof err) != 0 || m.kind != MSG_VAL) return -1;
    int ok = m.u.store.ok;
    snprintf(last_error, sizeof last_error, "%s", m.u.store.error);
    if (key) snprintf(key, key_len, "%s", m.u.store.key);
    if (val) snprintf(val, val_len, "%.*s", (int)m.u.store.val_len, m.u.store.val ? (char *)m.u.store.val : "");
    msg_done(&m);
    return ok;
}

int main(void)
{
    void *ctx = zmq_ctx_new();
    void *router = zmq_socket(ctx, ZMQ_ROUTER), *dealer = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, timeout_ms = 2000;
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(dealer, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    zmq_setsockopt(dealer, ZMQ_ROUTING_ID, "rank-0", 6);
    if (zmq_bind(router, "inproc://store") || zmq_connect(dealer, "inproc://store")) {
        printf("FAIL: %s:setup: %s\n", __FILE__, zmq_strerror(zmq_errno()));
        return 1;
    }
    /* the ROUTER learns the peer's id from its first frame */
    CodecBuf buf;
    codec_buf_init(&buf);
    char err[256], ident[ZS_IDENT_MAX];
    size_t ident_len = 0;
    Msg hello = req(MSG_GET, "nothing", NULL, 0, 0);
    Msg got;
    zs_send(dealer, &hello, &buf, 0, err, sizeof err);
    zs_recv_from(router, ident, &ident_len, &got, 0, err, sizeof err);
    msg_done(&got);
    Store *s = store_new();

    TEST_BEGIN("many_keys_set_and_read_back");
    int acks = 0;
    for (int i = 0; i < 200; i++) {
        char key[32], val[32];
        snprintf(key, sizeof key, "key-%d", i);
        snprintf(val, sizeof val, "val-%d", i);
        Msg m = req(MSG_SET, key, val, (uint32_t)strlen(val), 0);
        CHECK(store_handle(s, router, ident, ident_len, &m, 0, &buf) == 0, "set %s refused", key);
        acks += next_reply(dealer, NULL, 0, NULL, 0) == 1;
    }
    CHECK(acks == 200, "%d of 200 sets acknowledged", acks);
    CHECK(store_keys(s) == 200, "%zu keys", store_keys(s));
    Msg get = req(MSG_GET, "key-150", NULL, 0, 0);
    char key[PROTO_STR_MED], val[64];
    CHECK(store_handle(s, router, ident, ident_len, &get, 0, &buf) == 0, "get refused");
    CHECK(next_reply(dealer, key, sizeof key, val, sizeof val) == 1 && !strcmp(key, "key-150") &&
              !strcmp(val, "val-150"),
          "get key-150: %s = %s", key, val);
    TEST_END();

    TEST_BEGIN("a_set_wakes_every_waiter_of_its_key");
    for (int i = 0; i < 100; i++) {
        Msg w = req(MSG_WAIT, "late", NULL, 0, 0);
        CHECK(store_handle(s, router, ident, ident_len, &w, 0, &buf) == 0, "wait %d refused", i);
    }
    CHECK(store_waiting(s) == 100, "%zu waiting", store_waiting(s));
    Msg set = req(MSG_SET, "late", "x", 1, 0);
    store_handle(s, router, ident, ident_len, &set, 0, &buf);
    CHECK(store_waiting(s) == 0, "%zu still waiting", store_waiting(s));
    int woken = 0;
    for (int i = 0; i < 101; i++) woken += next_reply(dealer, key, sizeof key, NULL, 0) == 1 && !strcmp(key, "late");
    CHECK(woken == 101, "%d of 101 replies (the ack, then 100 waiters) ok for \"late\"", woken);
    TEST_END();

    TEST_BEGIN("a_wait_times_out_with_ok_false");
    Msg w = req(MSG_WAIT, "never", NULL, 0, 10);
    store_handle(s, router, ident, ident_len, &w, 1000, &buf);
    store_tick(s, router, 1009, &buf);
    CHECK(store_waiting(s) == 1, "answered before its deadline");
    store_tick(s, router, 1010, &buf);
    CHECK(store_waiting(s) == 0, "%zu still waiting", store_waiting(s));
    CHECK(next_reply(dealer, key, sizeof key, NULL, 0) == 0 && !strcmp(key, "never"), "timeout reply for %s", key);
    TEST_END();

    TEST_BEGIN("a_value_too_large_is_refused_and_answered");
    static char big[(1u << 20) + 1];
    Msg m = req(MSG_SET, "big", big, sizeof big, 0);
    CHECK(store_handle(s, router, ident, ident_len, &m, 0, &buf) == -1, "a %zu-byte value was taken", sizeof big);
    CHECK(next_reply(dealer, key, sizeof key, NULL, 0) == 0 && !strcmp(key, "big"), "refusal for %s", key);
    CHECK(strstr(last_error, "1048576"), "the refusal says why: \"%s\"", last_error);
    CHECK(store_keys(s) == 200 + 1, "%zu keys", store_keys(s));
    TEST_END();

    TEST_BEGIN("a_huge_timeout_is_clamped_not_answered_at_once");
    /* 2^63-1 ms once overflowed the deadline and was answered at once */
    Msg hw = req(MSG_GET, "forever", NULL, 0, INT64_MAX);
    CHECK(store_handle(s, router, ident, ident_len, &hw, 5000, &buf) == 0, "get refused");
    store_tick(s, router, 5001, &buf);
    store_tick(s, router, 5000 + STORE_MAX_TIMEOUT_MS - 1, &buf);
    CHECK(store_waiting(s) == 1, "a get with timeout_ms 2^63-1 was answered before the clamp (%zu waiting)",
          store_waiting(s));
    store_tick(s, router, 5000 + STORE_MAX_TIMEOUT_MS, &buf);
    CHECK(store_waiting(s) == 0, "still waiting after the %d ms clamp", STORE_MAX_TIMEOUT_MS);
    CHECK(next_reply(dealer, key, sizeof key, NULL, 0) == 0 && !strcmp(key, "forever"), "timeout reply for %s", key);
    Msg neg = req(MSG_WAIT, "neg", NULL, 0, INT64_MIN);
    store_handle(s, router, ident, ident_len, &neg, 0, &buf);
    store_tick(s, router, STORE_DEFAULT_TIMEOUT_MS - 1, &buf);
    CHECK(store_waiting(s) == 1, "a negative timeout is not the default");
    store_tick(s, router, STORE_DEFAULT_TIMEOUT_MS, &buf);
    CHECK(store_waiting(s) == 0 && next_reply(dealer, NULL, 0, NULL, 0) == 0, "default timeout reply");
    TEST_END();

    TEST_BEGIN("the_store_is_bounded_in_bytes_with_a_reason");
    /* 2048 sets of 1 MiB once took ddptop to 2.1 GB */
    static char mib[1u << 20];
    int taken = 0, refused = 0;
    for (int i = 0; i < 2048 && refused == 0; i++) {
        char k[32];
        snprintf(k, sizeof k, "mib-%d", i);
        Msg m1 = req(MSG_SET, k, mib, sizeof mib, 0);
        if (store_handle(s, router, ident, ident_len, &m1, 0, &buf) == 0)
            taken++;
        else
            refused++;
        CHECK(next_reply(dealer, NULL, 0, NULL, 0) == (refused ? 0 : 1), "set %s: no or wrong reply", k);
    }
    CHECK(refused == 1 && taken < 64 && taken > 32, "%d MiB values taken before the first refusal", taken);
    CHECK(strstr(last_error, "store full"), "the refusal says why: \"%s\"", last_error);
    CHECK(store_bytes(s) <= STORE_MAX_BYTES, "%zu bytes held", store_bytes(s));
    /* overwriting a key in place needs no new room */
    Msg again = req(MSG_SET, "mib-0", "small", 5, 0);
    CHECK(store_handle(s, router, ident, ident_len, &again, 0, &buf) == 0, "overwrite of a held key refused");
    next_reply(dealer, NULL, 0, NULL, 0);
    Msg back = req(MSG_GET, "mib-0", NULL, 0, 0);
    store_handle(s, router, ident, ident_len, &back, 0, &buf);
    CHECK(next_reply(dealer, NULL, 0, val, sizeof val) == 1 && !strcmp(val, "small"), "overwritten value %s", val);
    TEST_END();

    store_free(&s);
    s = store_new();

    TEST_BEGIN("the_store_is_bounded_in_keys_and_stays_fast");
    /* the dealer reads no replies here: a ROUTER drops what its pipe cannot
     * hold, and the counts below are the store's own */
    int nk = 0;
    for (int i = 0; i < STORE_MAX_KEYS + 10; i++) {
        char k[32];
        snprintf(k, sizeof k, "k%d", i);
        Msg m1 = req(MSG_SET, k, "v", 1, 0);
        nk += store_handle(s, router, ident, ident_len, &m1, 0, &buf) == 0;
    }
    CHECK(nk == STORE_MAX_KEYS && store_keys(s) == STORE_MAX_KEYS, "%d keys taken, %zu held (limit %d)", nk,
          store_keys(s), STORE_MAX_KEYS);
    /* a full store still answers lookups of every key it holds (a hash: 65536 lookups in a linear store were
     * 2^31 string compares) */
    int found = 0;
    for (int i = 0; i < STORE_MAX_KEYS; i += 97) {
        char k[32];
        snprintf(k, sizeof k, "k%d", i);
        Msg g = req(MSG_GET, k, NULL, 0, 0);
        found += store_handle(s, router, ident, ident_len, &g, 0, &buf) == 0 && store_waiting(s) == 0;
    }
    CHECK(found == (STORE_MAX_KEYS + 96) / 97, "%d keys found", found);
    TEST_END();

    TEST_BEGIN("waiters_are_bounded_and_woken_by_their_own_key");
    int nw = 0;
    for (int i = 0; i < STORE_MAX_WAITERS + 5; i++) {
        char k[32];
        snprintf(k, sizeof k, "w%d", i % 3000);
        Msg g = req(MSG_WAIT, k, NULL, 0, 100);
        nw += store_handle(s, router, ident, ident_len, &g, 0, &buf) == 0;
    }
    CHECK(nw == STORE_MAX_WAITERS && store_waiting(s) == STORE_MAX_WAITERS, "%d waiters taken, %zu waiting", nw,
          store_waiting(s));
    store_free(&s);
    s = store_new();
    /* many keys waited for, one set: only its own waiters wake */
    for (int i = 0; i < 4000; i++) {
        char k[32];
        snprintf(k, sizeof k, "x%d", i);
        Msg g = req(MSG_WAIT, k, NULL, 0, 0);
        store_handle(s, router, ident, ident_len, &g, 0, &buf);
    }
    Msg x = req(MSG_WAIT, "x7", NULL, 0, 0);
    store_handle(s, router, ident, ident_len, &x, 0, &buf);
    Msg sx = req(MSG_SET, "x7", "7", 1, 0);
    store_handle(s, router, ident, ident_len, &sx, 0, &buf);
    CHECK(store_waiting(s) == 4000 - 1, "%zu waiting after one key's set (4001 - 2 expected)", store_waiting(s));
    store_tick(s, router, STORE_DEFAULT_TIMEOUT_MS, &buf);
    CHECK(store_waiting(s) == 0, "%zu waiting after every deadline", store_waiting(s));
    TEST_END();

    store_free(&s);
    codec_buf_done(&buf);
    zmq_close(dealer);
    zmq_close(router);
    zmq_ctx_term(ctx);
    CHECK_EXIT();
}
