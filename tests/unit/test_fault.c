/* test_fault.c — --fault specs parse as documented, bad ones are refused
 * with a message, and live faults survive the trip through a command arg. */
#include <string.h>

#include "check.h"
#include "wire/fault.h"

int main(void)
{
    char err[256];
    TEST_BEGIN("specs_parse");
    FaultPlan p = { 0 };
    CHECK(fault_parse(&p, "kill:1@50", err, sizeof err) == 0, "%s", err);
    CHECK(fault_parse(&p, "stall:2@0", err, sizeof err) == 0, "%s", err);
    CHECK(fault_parse(&p, "slow:3:25ms", err, sizeof err) == 0, "%s", err);
    CHECK(fault_parse(&p, "slow:0:7", err, sizeof err) == 0, "%s", err);
    CHECK(fault_parse(&p, "skip-set-epoch", err, sizeof err) == 0, "%s", err);
    CHECK(fault_parse(&p, "unsafe-stop@20", err, sizeof err) == 0, "%s", err);
    CHECK(fault_parse(&p, "no-barrier", err, sizeof err) == 0, "%s", err);
    CHECK(p.n == 7, "n %d", p.n);
    const Fault *k = fault_find(&p, FAULT_KILL, 1);
    CHECK(k && k->step == 50, "kill found for rank 1");
    CHECK(fault_find(&p, FAULT_KILL, 0) == NULL, "kill is rank 1's only");
    const Fault *s = fault_find(&p, FAULT_SLOW, 3);
    CHECK(s && s->ms == 25, "slow 25 ms");
    CHECK(fault_find(&p, FAULT_SKIP_SET_EPOCH, 5) != NULL, "every-rank fault applies to any rank");
    CHECK(fault_find(&p, FAULT_UNSAFE_STOP, 0)->step == 20, "unsafe-stop step");
    TEST_END();

    TEST_BEGIN("bad_specs_refused");
    const char *bad[] = { "kill",       "kill:1",     "kill:x@3",     "kill:1@-2", "slow:1", "slow:1:0ms",
                          "slow:1:abc", "frobnicate", "unsafe-stopx", "stall:@4",  "" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FaultPlan q = { 0 };
        err[0] = 0;
        CHECK(fault_parse(&q, bad[i], err, sizeof err) == -1 && strstr(err, "--fault") && q.n == 0, "\"%s\" accepted",
              bad[i]);
    }
    TEST_END();

    TEST_BEGIN("pack_roundtrip_and_explain");
    Fault f = { .kind = FAULT_SLOW, .rank = 1023, .ms = 250 }, g;
    CHECK(fault_unpack(fault_pack(&f), &g) == 0 && g.kind == FAULT_SLOW && g.rank == 1023 && g.ms == 250, "slow");
    Fault h = { .kind = FAULT_UNSAFE_STOP, .rank = -1, .step = 123456789 };
    CHECK(fault_unpack(fault_pack(&h), &g) == 0 && g.kind == FAULT_UNSAFE_STOP && g.rank == -1 && g.step == 123456789,
          "unsafe-stop");
    CHECK(fault_unpack(0, &g) == -1, "arg 0 is no fault");
    char buf[300];
    fault_explain(&f, buf, sizeof buf);
    CHECK(strstr(buf, "rank 1023") && strstr(buf, "250 ms"), "%s", buf);
    TEST_END();
    CHECK_EXIT();
}
