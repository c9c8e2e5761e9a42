/*
 * choose.c -- what decides, on every machine, which calls take the device path: its knobs
 * (read at init even where there is no GPU, so a bad value is refused everywhere), the order a
 * point-to-point batch runs in, and the device path's hooks for the engine. Built with and
 * without CUDA (the rest of lib/cuda is CUDA's; cuda_none.c stands in without it).
 */
#include "lib/cuda/cuda.h"

#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/core/comm.h"

#include <string.h>

/*
 * The device path's knobs, read at init on every machine (a bad value is refused even where
 * there is no GPU). TUTTI_CUDA_P2P_MIN=auto: where ranks share a GPU their processes' work
 * takes turns on it (CUDA time-slices contexts) and every turn costs tens of microseconds;
 * measured on one H200 shared by 2 and 4 ranks (BENCHMARKS.md) the device path's many small
 * GPU operations lose to two staging copies below a few MiB, so auto stages below 4 MiB
 * there and takes the device path for everything where each rank has its own GPU. Either
 * way the answer depends on the published bus ids and the call's size only: the same on
 * every rank.
 */
tutti_result_t tt_cuda_read_config(struct tutti_comm *c)
{
    const char *min = tt_env_str("TUTTI_CUDA_P2P_MIN"), *buff_s = tt_env_str("TUTTI_CUDA_BUFFSIZE");
    size_t buff = 0;

    c->cuda.min_auto = strcmp(min, "auto") == 0;
    c->cuda.min_bytes = 0;
    if (!c->cuda.min_auto && tt_parse_size(min, &c->cuda.min_bytes) != 0)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "TUTTI_CUDA_P2P_MIN='%s' is not a byte count (K/M/G) or auto", min);
    if (tt_parse_size(buff_s, &buff) != 0 || buff / (size_t)c->nslots < 4096 || buff > (1ull << 31))
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "TUTTI_CUDA_BUFFSIZE='%s' must be a byte count (K/M/G) giving slots of at "
                       "least 4 KiB (TUTTI_STEPS=%d), at most 2G",
                       buff_s, c->nslots);
    c->cuda.slot_bytes = (buff / (size_t)c->nslots) & ~(size_t)255;
    return TUTTI_SUCCESS;
}

int tt_cuda_p2p_split(const struct tutti_comm *comm, const struct tt_p2p_op *ops, int nops,
                      struct tt_p2p_op *out)
{
    int ndev = 0, k = 0;

    for (int i = 0; i < nops; i++)
        ndev += tt_cuda_dev_p2p(comm, &ops[i]);
    for (int pass = 1; out && pass >= 0; pass--)
        for (int i = 0; i < nops; i++)
            if (tt_cuda_dev_p2p(comm, &ops[i]) == pass)
                out[k++] = ops[i];
    return ndev;
}

const struct tt_dev_hooks tt_cuda_dev_hooks = {tt_cuda_dev_begin, tt_cuda_dev_end};
