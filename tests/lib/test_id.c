/* test_id.c -- the id's printable form, the size parser behind TUTTI_BUFFSIZE, knob parsing. */
#include "lib/config.h"
#include "lib/id.h"

#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tutti_id_t sample_id(void)
{
    struct tt_id_info info;
    tutti_id_t id;

    cr_assert_eq(tt_addr_resolve("127.0.0.1", 4242, &info.root), TUTTI_SUCCESS);
    for (int i = 0; i < TT_SECRET_BYTES; i++)
        info.secret[i] = (unsigned char)(i * 37 + 1);
    tt_id_encode(&info, &id);
    return id;
}

Test(id, string_round_trip)
{
    tutti_id_t id = sample_id(), back;
    struct tt_id_info info;
    char s[TUTTI_ID_STRLEN], where[80];

    cr_assert_eq(tutti_id_to_string(&id, s, sizeof(s)), TUTTI_SUCCESS);
    cr_assert_eq(strlen(s), TUTTI_ID_STRLEN - 1);
    cr_assert(strncmp(s, "tutti1:", 7) == 0);
    cr_assert_eq(tutti_id_from_string(s, &back), TUTTI_SUCCESS);
    cr_assert(memcmp(&id, &back, sizeof(id)) == 0);
    cr_assert_eq(tt_id_decode(&back, &info), 0);
    cr_assert_str_eq(tt_addr_str(&info.root, where, sizeof(where)), "127.0.0.1:4242");
}

Test(id, malformed_strings_are_refused_with_a_reason)
{
    tutti_id_t id = sample_id(), out;
    char s[TUTTI_ID_STRLEN + 8];
    const unsigned char before = out.internal[0] = 0xee;

    tutti_id_to_string(&id, s, sizeof(s));
    char bad[TUTTI_ID_STRLEN + 8];

    strcpy(bad, s);
    bad[0] = 'x';
    cr_assert_eq(tutti_id_from_string(bad, &out), TUTTI_ERR_INVALID_ARG);
    cr_assert(strstr(tutti_last_error(), "start with") != NULL, "%s", tutti_last_error());

    strcpy(bad, s);
    bad[100] = 'g';
    cr_assert_eq(tutti_id_from_string(bad, &out), TUTTI_ERR_INVALID_ARG);
    cr_assert(strstr(tutti_last_error(), "non-hex") != NULL, "%s", tutti_last_error());

    strcpy(bad, s);
    bad[TUTTI_ID_STRLEN - 2] = '\0';
    cr_assert_eq(tutti_id_from_string(bad, &out), TUTTI_ERR_INVALID_ARG);
    cr_assert(strstr(tutti_last_error(), "characters") != NULL, "%s", tutti_last_error());

    strcpy(bad, s);
    strcat(bad, "00");
    cr_assert_eq(tutti_id_from_string(bad, &out), TUTTI_ERR_INVALID_ARG);

    strcpy(bad, s);
    bad[7 + 9] = '7'; /* format version byte */
    cr_assert_eq(tutti_id_from_string(bad, &out), TUTTI_ERR_INVALID_ARG);
    cr_assert(strstr(tutti_last_error(), "version") != NULL, "%s", tutti_last_error());

    cr_assert_eq(tutti_id_from_string(NULL, &out), TUTTI_ERR_INVALID_ARG);
    cr_assert_eq(tutti_id_from_string(s, NULL), TUTTI_ERR_INVALID_ARG);
    cr_assert_eq(tutti_id_to_string(&id, s, 10), TUTTI_ERR_INVALID_ARG);
    cr_assert_eq(out.internal[0], before, "outputs are written only on success");
}

Test(id, get_id_gives_distinct_secrets)
{
    tutti_id_t a, b;
    struct tt_id_info ia, ib;

    cr_assert_eq(tutti_get_id(&a), TUTTI_SUCCESS, "%s", tutti_last_error());
    cr_assert_eq(tutti_get_id(&b), TUTTI_SUCCESS, "%s", tutti_last_error());
    cr_assert_eq(tt_id_decode(&a, &ia), 0);
    cr_assert_eq(tt_id_decode(&b, &ib), 0);
    cr_assert(memcmp(ia.secret, ib.secret, TT_SECRET_BYTES) != 0);
    cr_assert_neq(tt_addr_port(&ia.root), tt_addr_port(&ib.root));
    cr_assert_eq(tutti_get_id(NULL), TUTTI_ERR_INVALID_ARG);
}

Test(config, sizes)
{
    size_t v;

    cr_assert(tt_parse_size("4096", &v) == 0 && v == 4096);
    cr_assert(tt_parse_size("4K", &v) == 0 && v == 4096);
    cr_assert(tt_parse_size("1M", &v) == 0 && v == 1u << 20);
    cr_assert(tt_parse_size("2G", &v) == 0 && v == 2ull << 30);
    cr_assert(tt_parse_size("16MB", &v) == 0 && v == 16u << 20);
    cr_assert(tt_parse_size("", &v) == -1);
    cr_assert(tt_parse_size("-1", &v) == -1);
    cr_assert(tt_parse_size("4X", &v) == -1);
    cr_assert(tt_parse_size("99999999999999999999", &v) == -1);
    cr_assert(tt_parse_size("99999999999G", &v) == -1);
}

Test(config, strerror_covers_every_code)
{
    for (int r = 0; r < TUTTI_NUM_RESULTS; r++)
        cr_assert(strcmp(tutti_strerror((tutti_result_t)r), "unknown result code") != 0);
    cr_assert_str_eq(tutti_strerror((tutti_result_t)999), "unknown result code");
    cr_assert_eq(tutti_version(), TUTTI_VERSION_CODE);
}

/* What this test has written to stderr (redirected), into buf. */
static const char *written(char *buf, size_t size)
{
    size_t n;

    fflush(stderr);
    n = fread(buf, 1, size - 1, cr_get_redirected_stderr());
    buf[n] = 0;
    return buf;
}

static int count_in(const char *text, const char *needle)
{
    int count = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        count++;
    return count;
}

/* Each Criterion test runs in a process of its own, so each reads its knobs afresh. */
Test(config, ranges_clamp_and_warn_once, .init = cr_redirect_stderr)
{
    char buf[4096];
    const char *out;

    setenv("TUTTI_NSOCKS", "99", 1);
    setenv("TUTTI_IB_QPS", "3", 1);
    setenv("TUTTI_SPIN", "-3", 1);
    cr_assert_eq(tt_env_int_in("TUTTI_NSOCKS", 1, 16), 16);
    cr_assert_eq(tt_env_int_in("TUTTI_NSOCKS", 1, 16), 16);
    cr_assert_eq(tt_env_int_in("TUTTI_IB_QPS", 1, 8), 3);
    cr_assert_eq(tt_env_int_in("TUTTI_SPIN", 0, 100000000), 0);
    out = written(buf, sizeof(buf));
    cr_assert_eq(count_in(out, "TUTTI_NSOCKS=99 is outside 1..16; using 16"), 1, "%s", out);
    cr_assert_eq(count_in(out, "TUTTI_SPIN=-3 is outside 0..100000000; using 0"), 1, "%s", out);
    cr_assert_eq(count_in(out, "TUTTI_IB_QPS"), 0, "%s", out);
}

Test(config, malformed_values_warn_once_and_take_the_default, .init = cr_redirect_stderr)
{
    char buf[4096];
    const char *out;

    setenv("TUTTI_NSOCKS", "lots", 1);
    setenv("TUTTI_TIMEOUT", "soon", 1);
    cr_assert_eq(tt_env_int_in("TUTTI_NSOCKS", 1, 16), 2);
    cr_assert_eq(tt_env_int("TUTTI_NSOCKS"), 2);
    cr_assert_eq(tt_env_double("TUTTI_TIMEOUT"), 300.0);
    cr_assert_eq(tt_env_double("TUTTI_TIMEOUT"), 300.0);
    out = written(buf, sizeof(buf));
    cr_assert_eq(count_in(out, "TUTTI_NSOCKS='lots' is not an integer; using 2"), 1, "%s", out);
    cr_assert_eq(count_in(out, "TUTTI_TIMEOUT='soon' is not a number; using 300"), 1, "%s", out);
}
