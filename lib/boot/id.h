/*
 * id.h -- what a tutti_id_t holds: the rendezvous (root) address and a random secret.
 *
 * Layout of the 128 bytes: "TTID", format version (1 byte), 3 zero bytes, the packed root
 * address (20 bytes), the secret (32 bytes), zeros. The printable form is "tutti1:" followed
 * by the 128 bytes in lowercase hex.
 */
#ifndef TT_ID_H
#define TT_ID_H

#include "lib/boot/socket.h"

#define TT_SECRET_BYTES 32
#define TT_ID_VERSION 1

struct tt_id_info {
    struct tt_addr root;
    unsigned char secret[TT_SECRET_BYTES];
};

void tt_id_encode(const struct tt_id_info *info, tutti_id_t *id);
/* 0 on success; -1 with the reason in tutti_last_error(). */
int tt_id_decode(const tutti_id_t *id, struct tt_id_info *info);

/* Fill buf with cryptographically random bytes (getrandom). */
tutti_result_t tt_random(void *buf, size_t len);

/* Short hex tag derived from the secret, unique per communicator (for OS object names). */
void tt_id_tag(const struct tt_id_info *info, char *tag, size_t size);

#endif
