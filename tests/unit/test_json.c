/* test_json.c — the JSON writer (base/json.h): commas in nested
 * containers, escaping of quotes, control characters and ill-formed
 * UTF-8, number formats and null for NaN, the spaced style, line breaks,
 * and the same text through a FILE and through the growing buffer.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "base/json.h"

/* A document touching every call, the same for either output. */
static void sample(Json *j)
{
    json_obj(j);
    json_kv_str(j, "s", "a\"b\\c\n\r\t\b\f\x01\x1f\x7f caf\xc3\xa9 \xff\xed\xa0\x80 \xe2\x82");
    json_kv_int(j, "i", -42);
    json_kv_uint(j, "u", UINT64_MAX);
    json_kv_bool(j, "t", true);
    json_key(j, "n");
    json_null(j);
    json_key(j, "a");
    json_arr(j);
    json_double(j, 0.1);
    json_double(j, 2);
    json_double(j, 1e300);
    json_double(j, NAN);
    json_fixed(j, 1.23456, 3);
    json_sig(j, 1.0 / 3, 6);
    json_fixed(j, INFINITY, 1);
    json_arr(j);
    json_arr_end(j);
    json_obj(j);
    json_obj_end(j);
    json_hex(j, "\x00\xab", 2);
    json_raw(j, "12.500");
    json_arr_end(j);
    json_keyn(j, "k\"ey", 4);
    json_obj(j);
    json_kv_double(j, "x", -0.5);
    json_kv_fixed(j, "y", 2.25, 1);
    json_kv_sig(j, "z", 123456789.0, 4);
    json_obj_end(j);
    json_obj_end(j);
    json_text(j, "\n");
}

static const char SAMPLE[] =
    "{\"s\":\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\\u007f caf\xc3\xa9 \\ufffd\\ufffd\\ufffd\\ufffd \\ufffd\\ufffd\","
    "\"i\":-42,\"u\":18446744073709551615,\"t\":true,\"n\":null,"
    "\"a\":[0.1,2.0,1e+300,null,1.235,0.333333,null,[],{},\"00ab\",12.500],"
    "\"k\\\"ey\":{\"x\":-0.5,\"y\":2.2,\"z\":1.235e+08}}\n";

static void test_file_and_buffer(void)
{
    TEST_BEGIN("json_file_and_buffer_same_text");
    char *got = NULL;
    size_t got_len = 0;
    FILE *f = open_memstream(&got, &got_len);
    Json j;
    json_init_file(&j, f);
    sample(&j);
    CHECK(!json_failed(&j), "file writer failed");
    json_done(&j);
    fclose(f);
    CHECK(strcmp(got, SAMPLE) == 0, "file:\n%s\nwant:\n%s", got, SAMPLE);
    free(got);

    json_init_buf(&j);
    sample(&j);
    size_t len = 0;
    const char *b = json_buf(&j, &len);
    CHECK(b && strcmp(b, SAMPLE) == 0 && len == strlen(SAMPLE), "buffer:\n%s", b ? b : "(null)");
    json_done(&j);
    TEST_END();
}

static void test_spaced_and_breaks(void)
{
    TEST_BEGIN("json_spaced_and_line_breaks");
    Json j;
    json_init_buf(&j);
    j.spaced = true;
    json_obj(&j);
    json_kv_int(&j, "a", 1);
    json_key(&j, "b");
    json_obj(&j);
    json_kv_fixed(&j, "p50", 0.25, 1);
    json_kv_int(&j, "max", 3);
    json_obj_end(&j);
    json_obj_end(&j);
    const char *b = json_buf(&j, NULL);
    CHECK(strcmp(b, "{\"a\": 1, \"b\": {\"p50\": 0.2, \"max\": 3}}") == 0, "spaced: %s", b);
    json_done(&j);

    /* Chrome trace layout: each event on its own line. */
    json_init_buf(&j);
    json_obj(&j);
    json_kv_int(&j, "w", 1);
    json_break(&j);
    json_key(&j, "ev");
    json_arr(&j);
    for (int i = 0; i < 3; i++) {
        json_break(&j);
        json_obj(&j);
        json_kv_int(&j, "i", i);
        json_obj_end(&j);
    }
    json_text(&j, "\n");
    json_arr_end(&j);
    json_obj_end(&j);
    b = json_buf(&j, NULL);
    CHECK(strcmp(b, "{\"w\":1,\n\"ev\":[\n{\"i\":0},\n{\"i\":1},\n{\"i\":2}\n]}") == 0, "breaks: %s", b);
    json_done(&j);

    /* JSON lines: top-level values take no commas. */
    json_init_buf(&j);
    for (int i = 0; i < 2; i++) {
        json_obj(&j);
        json_kv_int(&j, "i", i);
        json_obj_end(&j);
        json_text(&j, "\n");
    }
    b = json_buf(&j, NULL);
    CHECK(strcmp(b, "{\"i\":0}\n{\"i\":1}\n") == 0, "lines: %s", b);
    json_done(&j);
    TEST_END();
}

static void test_shortest_and_depth(void)
{
    TEST_BEGIN("json_shortest_round_trip_and_depth_limit");
    char b[40];
    double vs[] = { 0.1, 1.0 / 3, 2.5e-3, 123456789012345678.0, -1e-310, 0.30000000000000004 };
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        json_shortest(b, sizeof b, vs[i]);
        CHECK(strtod(b, NULL) == vs[i], "%s does not read back as %.17g", b, vs[i]);
    }
    json_shortest(b, sizeof b, 0.1);
    CHECK(strcmp(b, "0.1") == 0, "0.1 became %s", b);

    Json j;
    json_init_buf(&j);
    for (int i = 0; i < JSON_DEPTH_MAX; i++) json_arr(&j);
    CHECK(!json_failed(&j), "failed at the limit");
    json_arr(&j);
    CHECK(json_failed(&j) && json_buf(&j, NULL) == NULL, "nesting past the limit not refused");
    json_done(&j);
    TEST_END();
}

int main(void)
{
    test_file_and_buffer();
    test_spaced_and_breaks();
    test_shortest_and_depth();
    CHECK_EXIT();
}
