/* test_pystack.c — faulthandler's dump picked out of a rank's log: every
 * thread kept in order, the script's own output in between dropped, a
 * full buffer cut at a line, nothing found in a log without a dump. */
#include <string.h>

#include "check.h"
#include "model/pystack.h"

int main(void)
{
    char out[4096];
    TEST_BEGIN("threads_kept_other_output_dropped");
    const char *log = "rank 1 epoch 0 step 7 loss 2.25\n"
                      "Thread 0x00007f1c2a7fc640 (most recent call first):\n"
                      "  File \"/usr/lib/python3/dist-packages/torch/distributed/c10d.py\", line 3 in wait\n"
                      "rank 1 epoch 0 step 8 loss 2.20\n"
                      "  File \"/work/ddptop/beat.py\", line 60 in _loop\n"
                      "\n"
                      "Current thread 0x00007f1c3b1e1000 (most recent call first):\n"
                      "  File \"examples/ddp_basics.py\", line 61 in save_checkpoint\r\n"
                      "  File \"examples/ddp_basics.py\", line 99 in main\n"
                      "  <no Python frame>\n"
                      "\n"
                      "rank 1 epoch 0 step 9 loss 2.18\n";
    int n = pystack_extract(log, strlen(log), out, sizeof out);
    CHECK(n == 2, "threads %d", n);
    const char *want = "Thread 0x00007f1c2a7fc640 (most recent call first):\n"
                       "  File \"/usr/lib/python3/dist-packages/torch/distributed/c10d.py\", line 3 in wait\n"
                       "  File \"/work/ddptop/beat.py\", line 60 in _loop\n"
                       "\n"
                       "Current thread 0x00007f1c3b1e1000 (most recent call first):\n"
                       "  File \"examples/ddp_basics.py\", line 61 in save_checkpoint\n"
                       "  File \"examples/ddp_basics.py\", line 99 in main\n"
                       "  <no Python frame>\n";
    CHECK(!strcmp(out, want), "got:\n%s", out);
    TEST_END();

    TEST_BEGIN("no_dump_no_threads_and_a_small_buffer");
    const char *plain = "rank 0 params 101770\n  File \"x.py\", line 1 in f\n";
    CHECK(pystack_extract(plain, strlen(plain), out, sizeof out) == 0 && out[0] == '\0', "found '%s'", out);
    CHECK(pystack_extract(NULL, 0, out, sizeof out) == 0, "NULL text");
    char small[70];
    n = pystack_extract(log, strlen(log), small, sizeof small);
    CHECK(n == 1 && strlen(small) < sizeof small && small[strlen(small) - 1] == '\n', "cut: %d '%s'", n, small);
    TEST_END();
    CHECK_EXIT();
}
