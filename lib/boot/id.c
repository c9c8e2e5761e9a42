/* id.c -- tutti_id_t: creation, encoding, printable form; see id.h. */
#include "lib/boot/id.h"
#include "lib/boot/bootstrap.h"
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#define ID_PREFIX "tutti1:"

void tt_id_encode(const struct tt_id_info *info, tutti_id_t *id)
{
    memset(id, 0, sizeof(*id));
    memcpy(id->internal, "TTID", 4);
    id->internal[4] = TT_ID_VERSION;
    tt_addr_pack(&info->root, id->internal + 8);
    memcpy(id->internal + 8 + TT_ADDR_PACKED, info->secret, TT_SECRET_BYTES);
}

int tt_id_decode(const tutti_id_t *id, struct tt_id_info *info)
{
    if (memcmp(id->internal, "TTID", 4) != 0) {
        tt_fail_quiet(NULL, TUTTI_ERR_INVALID_ARG, "id is not a tutti id (bad magic)");
        return -1;
    }
    if (id->internal[4] != TT_ID_VERSION) {
        tt_fail_quiet(NULL, TUTTI_ERR_INVALID_ARG,
                      "id has format version %d; this library reads version %d", id->internal[4],
                      TT_ID_VERSION);
        return -1;
    }
    if (tt_addr_unpack(id->internal + 8, &info->root) != 0) {
        tt_fail_quiet(NULL, TUTTI_ERR_INVALID_ARG, "id holds no valid root address");
        return -1;
    }
    memcpy(info->secret, id->internal + 8 + TT_ADDR_PACKED, TT_SECRET_BYTES);
    return 0;
}

tutti_result_t tt_random(void *buf, size_t len)
{
    unsigned char *p = buf;

    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return tt_fail(NULL, TUTTI_ERR_SYSTEM, "getrandom failed: %m");
        }
        p += n;
        len -= (size_t)n;
    }
    return TUTTI_SUCCESS;
}

void tt_id_tag(const struct tt_id_info *info, char *tag, size_t size)
{
    const char *job = tt_env_str("TUTTI_JOB_TAG");
    char hex[17];

    for (int i = 0; i < 8; i++)
        snprintf(hex + 2 * i, 3, "%02x", info->secret[i]);
    if (*job)
        snprintf(tag, size, "%s-%s", job, hex);
    else
        snprintf(tag, size, "%s", hex);
}

tutti_result_t tutti_get_id(tutti_id_t *id)
{
    struct tt_id_info info;
    char ifname[64], buf[80];

    tt_base_init();
    if (!id)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_get_id: id is NULL");
    TT_CHECK(tt_env_validate("tutti_get_id"));
    TT_CHECK(tt_if_pick(&info.root, ifname, sizeof(ifname)));
    TT_CHECK(tt_random(info.secret, sizeof(info.secret)));
    TT_CHECK(tt_boot_root_start(&info.root, info.secret, tt_env_double("TUTTI_TIMEOUT")));
    TT_INFO(TT_SUB_BOOT, "rendezvous at %s (interface %s)",
            tt_addr_str(&info.root, buf, sizeof(buf)), ifname);
    tt_id_encode(&info, id);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_id_to_string(const tutti_id_t *id, char *buf, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = strlen(ID_PREFIX);

    if (!id)
        return tt_fail_quiet(NULL, TUTTI_ERR_INVALID_ARG, "tutti_id_to_string: id is NULL");
    if (!buf || size < TUTTI_ID_STRLEN)
        return tt_fail_quiet(NULL, TUTTI_ERR_INVALID_ARG,
                             "tutti_id_to_string: buf must hold TUTTI_ID_STRLEN (%d) bytes",
                             TUTTI_ID_STRLEN);
    memcpy(buf, ID_PREFIX, n);
    for (int i = 0; i < TUTTI_ID_BYTES; i++) {
        buf[n++] = hex[id->internal[i] >> 4];
        buf[n++] = hex[id->internal[i] & 15];
    }
    buf[n] = '\0';
    return TUTTI_SUCCESS;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

tutti_result_t tutti_id_from_string(const char *str, tutti_id_t *id)
{
    size_t n = strlen(ID_PREFIX), len;
    tutti_id_t tmp;
    struct tt_id_info info;

    if (!str || !id)
        return tt_fail_quiet(NULL, TUTTI_ERR_INVALID_ARG, "tutti_id_from_string: %s is NULL",
                             !str ? "str" : "id");
    len = strnlen(str, TUTTI_ID_STRLEN + 1);
    if (strncmp(str, ID_PREFIX, n) != 0)
        return tt_fail_quiet(NULL, TUTTI_ERR_INVALID_ARG, "id string does not start with '%s'",
                             ID_PREFIX);
    if (len != TUTTI_ID_STRLEN - 1)
        return tt_fail_quiet(NULL, TUTTI_ERR_INVALID_ARG,
                             "id string has %zu characters; expected %d", len, TUTTI_ID_STRLEN - 1);
    for (int i = 0; i < TUTTI_ID_BYTES; i++) {
        int hi = hexval(str[n + 2 * (size_t)i]), lo = hexval(str[n + 2 * (size_t)i + 1]);
        if (hi < 0 || lo < 0)
            return tt_fail_quiet(NULL, TUTTI_ERR_INVALID_ARG,
                                 "id string has a non-hex character at offset %zu",
                                 n + 2 * (size_t)i + (hi < 0 ? 0 : 1));
        tmp.internal[i] = (unsigned char)(hi << 4 | lo);
    }
    if (tt_id_decode(&tmp, &info) != 0)
        return TUTTI_ERR_INVALID_ARG;
    *id = tmp;
    return TUTTI_SUCCESS;
}
