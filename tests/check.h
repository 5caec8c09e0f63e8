/* check.h — the tiny test harness every tests/test_*.c uses.
 *
 * A test binary runs its cases with TEST(name) blocks; each case prints one
 * line "PASS: file:name" or "FAIL: file:name: why". tests/run.sh counts them.
 */
#ifndef DDPTOP_CHECK_H
#define DDPTOP_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_failures_;
static int check_case_failed_;
static const char *check_case_;

#define TEST_BEGIN(name)        \
    do {                        \
        check_case_ = (name);   \
        check_case_failed_ = 0; \
    } while (0)
#define TEST_END()                                          \
    do {                                                    \
        if (check_case_failed_) {                           \
            check_failures_++;                              \
            printf("FAIL: %s:%s\n", __FILE__, check_case_); \
        } else {                                            \
            printf("PASS: %s:%s\n", __FILE__, check_case_); \
        }                                                   \
        fflush(stdout);                                     \
    } while (0)

/* CHECK(cond, fmt, ...): record a failure with a reason, go on. */
#define CHECK(cond, ...)                                                               \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            check_case_failed_ = 1;                                                    \
            fprintf(stdout, "  %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stdout, __VA_ARGS__);                                              \
            fputc('\n', stdout);                                                       \
        }                                                                              \
    } while (0)

#define CHECK_EXIT() return check_failures_ ? 1 : 0

#endif
