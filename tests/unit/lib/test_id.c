/* test_id.c -- the id's printable form, the size parser behind TUTTI_BUFFSIZE, knob parsing. */
#include "../../../lib/base/config.h"
#include "../../../lib/boot/id.h"

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

/*
 * Every knob of the table, with each value an attacker or a careless user would try: a value a
 * knob does not accept fails validation (what every init function and tutti-run do first)
 * naming the variable and the value; nothing is clamped or replaced. `accepted` lists, per bad
 * value, the knobs for which it is a value like any other (0 seconds of stall warning, GID
 * index -1, a file or host named "nan", ...).
 */
static const char *const bad_values[] = {"nan", "inf", "-1", "0", "99999999999999999999", "x!2"};
static const char *const accepted[] = {
    /* nan */ " TUTTI_ALGO TUTTI_SOCKET_IFNAME TUTTI_IBVERBS_LIB TUTTI_IB_HCA TUTTI_TOPO_FILE "
              "TUTTI_TOPO_DUMP_FILE TUTTI_HOSTID TUTTI_TRACE TUTTI_ID TUTTI_JOIN TUTTI_SECRET "
              "TUTTI_JOB_TAG ",
    /* inf */
    " TUTTI_ALGO TUTTI_SOCKET_IFNAME TUTTI_IBVERBS_LIB TUTTI_IB_HCA TUTTI_TOPO_FILE "
    "TUTTI_TOPO_DUMP_FILE TUTTI_HOSTID TUTTI_TRACE TUTTI_ID TUTTI_JOIN TUTTI_SECRET TUTTI_JOB_TAG ",
    /* -1 */
    " TUTTI_ALGO TUTTI_SOCKET_IFNAME TUTTI_IBVERBS_LIB TUTTI_IB_HCA TUTTI_TOPO_FILE "
    "TUTTI_TOPO_DUMP_FILE TUTTI_HOSTID TUTTI_TRACE TUTTI_ID TUTTI_JOIN TUTTI_SECRET TUTTI_JOB_TAG "
    "TUTTI_IB_GID_INDEX ",
    /* 0 */
    " TUTTI_ALGO TUTTI_SOCKET_IFNAME TUTTI_IBVERBS_LIB TUTTI_IB_HCA TUTTI_TOPO_FILE "
    "TUTTI_TOPO_DUMP_FILE TUTTI_HOSTID TUTTI_TRACE TUTTI_ID TUTTI_JOIN TUTTI_SECRET TUTTI_JOB_TAG "
    "TUTTI_STALL_WARN TUTTI_CHECK_COLL TUTTI_DETERMINISTIC TUTTI_SHM_SINGLE_COPY TUTTI_SYMMETRIC "
    "TUTTI_CUDA_P2P "
    "TUTTI_CUDA_P2P_MIN TUTTI_CUDA_ASYNC TUTTI_STREAM_STORES TUTTI_SPIN TUTTI_YIELD_US "
    "TUTTI_IB_GID_INDEX TUTTI_RANK TUTTI_LOCAL_RANK TUTTI_JOINING TUTTI_NET_CHUNK "
    "TUTTI_NET_WHOLE TUTTI_NET_DIRECT TUTTI_NET_COPY_MSG ",
    /* huge */
    " TUTTI_ALGO TUTTI_SOCKET_IFNAME TUTTI_IBVERBS_LIB TUTTI_IB_HCA TUTTI_TOPO_FILE "
    "TUTTI_TOPO_DUMP_FILE TUTTI_HOSTID TUTTI_TRACE TUTTI_ID TUTTI_JOIN TUTTI_SECRET TUTTI_JOB_TAG ",
    /* garbage */
    " TUTTI_ALGO TUTTI_SOCKET_IFNAME TUTTI_IBVERBS_LIB TUTTI_IB_HCA TUTTI_TOPO_FILE "
    "TUTTI_TOPO_DUMP_FILE TUTTI_HOSTID TUTTI_TRACE TUTTI_ID TUTTI_JOIN TUTTI_SECRET ",
};

Test(config, every_knob_refuses_bad_values)
{
    int checked = 0, numeric = 0;

    for (size_t i = 0; tt_env_knob(i); i++) {
        const char *name = tt_env_knob(i);
        char key[64];
        numeric += tt_env_numeric(name);
        snprintf(key, sizeof(key), " %s ", name);
        for (size_t v = 0; v < sizeof(bad_values) / sizeof(bad_values[0]); v++) {
            int ok = strstr(accepted[v], key) != NULL;
            char want[128];
            tt_env_forget();
            setenv(name, bad_values[v], 1);
            tutti_result_t rc = tt_env_validate("check");
            unsetenv(name);
            cr_assert_eq(rc, ok ? TUTTI_SUCCESS : TUTTI_ERR_INVALID_ARG, "%s='%s': %s", name,
                         bad_values[v], tutti_last_error());
            snprintf(want, sizeof(want), "check: %s='%s' ", name, bad_values[v]);
            if (!ok)
                cr_assert(strstr(tutti_last_error(), want), "%s='%s': %s", name, bad_values[v],
                          tutti_last_error());
            checked++;
        }
    }
    tt_env_forget();
    cr_assert_eq(tt_env_validate("check"), TUTTI_SUCCESS, "%s", tutti_last_error());
    cr_assert_geq(numeric, 16);
    cr_assert_geq(checked, 6 * 38);
}

/* Out of range, in range, and the words a numeric knob also takes. */
Test(config, ranges_and_words)
{
    static const struct {
        const char *name, *value;
        int ok;
    } cases[] = {
        {"TUTTI_TIMEOUT", "0.5", 1},
        {"TUTTI_TIMEOUT", "1e7", 0},
        {"TUTTI_TIMEOUT", "0", 0},
        {"TUTTI_TIMEOUT", "-inf", 0},
        {"TUTTI_NSOCKS", "16", 1},
        {"TUTTI_NSOCKS", "17", 0},
        {"TUTTI_BUFFSIZE", "1G", 1},
        {"TUTTI_BUFFSIZE", "1T", 0},
        {"TUTTI_BUFFSIZE", "100G", 0},
        {"TUTTI_BUFFSIZE", "4K", 0},
        {"TUTTI_SPIN", "auto", 1},
        {"TUTTI_SPIN", "AUTO", 0},
        {"TUTTI_CUDA_P2P_MIN", "auto", 1},
        {"TUTTI_CUDA_P2P_MIN", "4M", 1},
        {"TUTTI_WAIT", "block", 1},
        {"TUTTI_WAIT", "sleep", 0},
        {"TUTTI_DEBUG", "info", 1},
        {"TUTTI_DEBUG", "LOUD", 0},
        {"TUTTI_DEBUG_SUBSYS", "^SHM,^NET", 1},
        {"TUTTI_DEBUG_SUBSYS", "INIT,FOO", 0},
        {"TUTTI_TRANSPORTS", "^shm,^socket", 1},
        {"TUTTI_TRANSPORTS", "shm,socket", 1},
        {"TUTTI_TRANSPORTS", "shm,^socket", 0},
        {"TUTTI_TRANSPORTS", "^shm,tcp", 0},
        {"TUTTI_TRANSPORTS", "^", 0},
        {"TUTTI_TRANSPORTS", "shm,,socket", 0},
        {"TUTTI_TUNE_LINKS", "0.3,10,5,2", 1},
        {"TUTTI_TUNE_LINKS", "0.3,nan,5,2", 0},
        {"TUTTI_TUNE_LINKS", "0.3,10,5,0", 0},
        {"TUTTI_TUNE_LINKS", "0.3,10,5,2,9", 0},
        {"TUTTI_TUNE_LINKS", "measure", 1},
        {"TUTTI_TUNE_LINKS", "measured", 0},
        {"TUTTI_JOB_TAG", "r123_a.b-c", 1},
        {"TUTTI_JOB_TAG", "../x", 0},
        {"TUTTI_IB_GID_INDEX", "256", 0},
        {"TUTTI_WORLD_SIZE", "0", 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tt_env_forget();
        setenv(cases[i].name, cases[i].value, 1);
        tutti_result_t rc = tt_env_validate("check");
        unsetenv(cases[i].name);
        cr_assert_eq(rc, cases[i].ok ? TUTTI_SUCCESS : TUTTI_ERR_INVALID_ARG, "%s='%s': %s",
                     cases[i].name, cases[i].value, tutti_last_error());
    }
    /* Several bad values: one message names them all. */
    tt_env_forget();
    setenv("TUTTI_TIMEOUT", "nan", 1);
    setenv("TUTTI_NSOCKS", "99", 1);
    cr_assert_eq(tutti_env_check(), TUTTI_ERR_INVALID_ARG);
    cr_assert(strstr(tutti_last_error(), "TUTTI_TIMEOUT='nan' is not a finite number of seconds"),
              "%s", tutti_last_error());
    cr_assert(strstr(tutti_last_error(), "TUTTI_NSOCKS='99' is not an integer within 1..16"), "%s",
              tutti_last_error());
}

/* A process that reads a bad value before validating gets the default, with one warning. */
Test(config, bad_values_read_early_take_the_default_once, .init = cr_redirect_stderr)
{
    char buf[4096];
    const char *out;

    setenv("TUTTI_NSOCKS", "lots", 1);
    setenv("TUTTI_TIMEOUT", "nan", 1);
    setenv("TUTTI_BUFFSIZE", "1T", 1);
    cr_assert_eq(tt_env_int("TUTTI_NSOCKS"), 2);
    cr_assert_eq(tt_env_int("TUTTI_NSOCKS"), 2);
    cr_assert_eq(tt_env_double("TUTTI_TIMEOUT"), 300.0);
    cr_assert_eq(tt_env_double("TUTTI_TIMEOUT"), 300.0);
    cr_assert_eq(tt_env_size("TUTTI_BUFFSIZE"), 1u << 20);
    out = written(buf, sizeof(buf));
    cr_assert_eq(count_in(out, "TUTTI_NSOCKS='lots' is not an integer within 1..16; using 2"), 1,
                 "%s", out);
    cr_assert_eq(count_in(out, "TUTTI_TIMEOUT='nan' is not a finite number"), 1, "%s", out);
    cr_assert_eq(count_in(out, "TUTTI_BUFFSIZE='1T' is not a byte count"), 1, "%s", out);
}

/* tutti_env_number: a binding's numeric knob from the one table, its bad values refused as
 * tutti_env_check refuses them; words and text knobs, and unknown names, are not numbers. */
Test(config, env_number_reads_numeric_knobs)
{
    double v = -1;

    tt_env_forget();
    unsetenv("TUTTI_NCCL_TIMEOUT");
    cr_assert_eq(tutti_env_number("TUTTI_NCCL_TIMEOUT", &v), TUTTI_SUCCESS);
    cr_assert_eq(v, 1800.0);
    setenv("TUTTI_BUFFSIZE", "2M", 1);
    cr_assert_eq(tutti_env_number("TUTTI_BUFFSIZE", &v), TUTTI_SUCCESS);
    cr_assert_eq(v, 2.0 * (1 << 20));
    setenv("TUTTI_NCCL_TIMEOUT", "-3", 1);
    tt_env_forget();
    cr_assert_eq(tutti_env_number("TUTTI_NCCL_TIMEOUT", &v), TUTTI_ERR_INVALID_ARG);
    cr_assert(strstr(tutti_last_error(), "TUTTI_NCCL_TIMEOUT='-3' is not a finite number"), "%s",
              tutti_last_error());
    cr_assert_eq(tutti_env_number("TUTTI_DEBUG", &v), TUTTI_ERR_INVALID_ARG);
    cr_assert(strstr(tutti_last_error(), "TUTTI_DEBUG is not a numeric"), "%s", tutti_last_error());
    cr_assert_eq(tutti_env_number("TUTTI_NO_SUCH_KNOB", &v), TUTTI_ERR_INVALID_ARG);
    cr_assert_eq(tutti_env_number("TUTTI_TIMEOUT", NULL), TUTTI_ERR_INVALID_ARG);
    unsetenv("TUTTI_NCCL_TIMEOUT");
    unsetenv("TUTTI_BUFFSIZE");
    tt_env_forget();
}
