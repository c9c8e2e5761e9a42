/*
 * net_ib_dev.c -- libibverbs at run time, and the HCA port of this process (net_ib.h).
 *
 * Choice of port: every device of the verbs library (TUTTI_IBVERBS_LIB), filtered by
 * TUTTI_IB_HCA, each port in state ACTIVE. The topology's nearest OpenFabrics device wins
 * when it is among them; otherwise ranks of a node spread over the ports by local rank.
 * GID: TUTTI_IB_GID_INDEX, or on Ethernet (RoCE) ports the first RoCE v2 GID with an
 * IPv4-mapped address, then any RoCE v2 GID, then the first non-zero one (types from sysfs);
 * InfiniBand ports route by LID and need none.
 */
#include "transport/net_ib.h"

#include "lib/base/config.h"
#include "lib/base/log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static int probed, found;
static char probe_why[256];
static struct tt_ib_dev dev;

struct tt_ib_dev *tt_ib_device(void)
{
    return found ? &dev : NULL;
}

const char *tt_ib_gid_str(const union ibv_gid *gid, char *buf, size_t size)
{
    const uint8_t *r = gid->raw;
    snprintf(buf, size, "%x:%x:%x:%x:%x:%x:%x:%x", r[0] << 8 | r[1], r[2] << 8 | r[3],
             r[4] << 8 | r[5], r[6] << 8 | r[7], r[8] << 8 | r[9], r[10] << 8 | r[11],
             r[12] << 8 | r[13], r[14] << 8 | r[15]);
    return buf;
}

/* Resolve every entry point; 0 on success, else names the missing one in why. */
static int load(struct tt_ibv *v, char *why, size_t size)
{
    const char *path = tt_env_str("TUTTI_IBVERBS_LIB");
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    static const char *names[] = {
        "ibv_get_device_list", "ibv_free_device_list", "ibv_get_device_name", "ibv_open_device",
        "ibv_close_device",    "ibv_query_device",     "ibv_query_port",      "ibv_query_gid",
        "ibv_alloc_pd",        "ibv_dealloc_pd",       "ibv_reg_mr",          "ibv_dereg_mr",
        "ibv_create_cq",       "ibv_destroy_cq",       "ibv_create_qp",       "ibv_modify_qp",
        "ibv_destroy_qp",      "ibv_wc_status_str"};
    void *fn[sizeof(names) / sizeof(names[0])];

    if (!lib) {
        snprintf(why, size,
                 "cannot load %s (%s); install rdma-core's libibverbs1 or set "
                 "TUTTI_IBVERBS_LIB",
                 path, dlerror());
        return -1;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        fn[i] = dlsym(lib, names[i]);
        if (!fn[i]) {
            snprintf(why, size, "%s has no %s", path, names[i]);
            dlclose(lib);
            return -1;
        }
    }
    /* Function pointers from void * (POSIX guarantees the conversion works). */
    memcpy(&v->get_device_list, &fn[0], sizeof(void *));
    memcpy(&v->free_device_list, &fn[1], sizeof(void *));
    memcpy(&v->get_device_name, &fn[2], sizeof(void *));
    memcpy(&v->open_device, &fn[3], sizeof(void *));
    memcpy(&v->close_device, &fn[4], sizeof(void *));
    memcpy(&v->query_device, &fn[5], sizeof(void *));
    memcpy(&v->query_port, &fn[6], sizeof(void *));
    memcpy(&v->query_gid, &fn[7], sizeof(void *));
    memcpy(&v->alloc_pd, &fn[8], sizeof(void *));
    memcpy(&v->dealloc_pd, &fn[9], sizeof(void *));
    memcpy(&v->reg_mr, &fn[10], sizeof(void *));
    memcpy(&v->dereg_mr, &fn[11], sizeof(void *));
    memcpy(&v->create_cq, &fn[12], sizeof(void *));
    memcpy(&v->destroy_cq, &fn[13], sizeof(void *));
    memcpy(&v->create_qp, &fn[14], sizeof(void *));
    memcpy(&v->modify_qp, &fn[15], sizeof(void *));
    memcpy(&v->destroy_qp, &fn[16], sizeof(void *));
    memcpy(&v->wc_status_str, &fn[17], sizeof(void *));
    fn[0] = dlsym(lib, "ibv_reg_dmabuf_mr"); /* optional */
    memcpy(&v->reg_dmabuf_mr, &fn[0], sizeof(void *));
    return 0; /* the library stays loaded for the life of the process */
}

/* Does "name" port "port" pass TUTTI_IB_HCA? */
static int hca_allowed(const char *name, int port)
{
    const char *spec = tt_env_str("TUTTI_IB_HCA");
    int exclude = 0, exact = 0, hit = 0;
    char buf[256];

    if (!*spec)
        return 1;
    if (*spec == '^')
        exclude = 1, spec++;
    if (*spec == '=')
        exact = 1, spec++;
    snprintf(buf, sizeof(buf), "%s", spec);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && !hit;
         t = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(t, ':');
        int want_port = colon ? atoi(colon + 1) : 0;
        if (colon)
            *colon = '\0';
        if ((exact ? strcmp(name, t) == 0 : strncmp(name, t, strlen(t)) == 0) &&
            (!want_port || want_port == port))
            hit = 1;
    }
    return exclude ? !hit : hit;
}

/* The GID type sysfs reports ("RoCE v2", "IB/RoCE v1"), "" where there is none. */
static void gid_type(const char *devname, int port, int index, char *out, size_t size)
{
    char path[256];
    FILE *f;

    out[0] = '\0';
    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", devname,
             port, index);
    f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(out, (int)size, f))
        out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

static int gid_zero(const union ibv_gid *g)
{
    static const union ibv_gid zero;
    return memcmp(g, &zero, sizeof(zero)) == 0;
}

static int ipv4_mapped(const union ibv_gid *g)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

/* Choose the GID index of an Ethernet port (see the header comment). */
static int pick_gid(struct tt_ibv *v, struct ibv_context *ctx, const char *devname, int port,
                    int table_len, union ibv_gid *gid)
{
    int best = -1, rank_best = 0;

    for (int i = 0; i < table_len && i < 256; i++) {
        union ibv_gid g;
        char type[32];
        int r;
        if (v->query_gid(ctx, (uint8_t)port, i, &g) != 0 || gid_zero(&g))
            continue;
        gid_type(devname, port, i, type, sizeof(type));
        r = strcmp(type, "RoCE v2") == 0 ? (ipv4_mapped(&g) ? 3 : 2) : 1;
        if (r > rank_best) {
            rank_best = r;
            best = i;
            *gid = g;
        }
    }
    return best;
}

struct cand {
    int dev;
    int port;
};

static int probe(const char *nearest, int local_rank, char *why, size_t size)
{
    struct ibv_device **list;
    struct cand c[64];
    int n = 0, ndev = 0, pick;
    long long gid_env = tt_env_int("TUTTI_IB_GID_INDEX");

    if (load(&dev.v, why, size) != 0)
        return 0;
    list = dev.v.get_device_list(&ndev);
    if (!list || ndev == 0) {
        snprintf(why, size, "%s lists no InfiniBand or RoCE device",
                 tt_env_str("TUTTI_IBVERBS_LIB"));
        if (list)
            dev.v.free_device_list(list);
        return 0;
    }
    for (int d = 0; d < ndev && n < 64; d++) {
        const char *name = dev.v.get_device_name(list[d]);
        struct ibv_context *ctx = dev.v.open_device(list[d]);
        struct ibv_device_attr da;
        if (!ctx)
            continue;
        if (dev.v.query_device(ctx, &da) == 0)
            for (int p = 1; p <= da.phys_port_cnt && n < 64; p++) {
                struct ibv_port_attr pa;
                memset(&pa, 0, sizeof(pa));
                if (dev.v.query_port(ctx, (uint8_t)p, &pa) == 0 && pa.state == IBV_PORT_ACTIVE &&
                    hca_allowed(name, p))
                    c[n++] = (struct cand){d, p};
            }
        dev.v.close_device(ctx);
    }
    if (n == 0) {
        snprintf(why, size, "no active port among %d device(s)%s%s", ndev,
                 *tt_env_str("TUTTI_IB_HCA") ? " allowed by TUTTI_IB_HCA=" : "",
                 tt_env_str("TUTTI_IB_HCA"));
        dev.v.free_device_list(list);
        return 0;
    }
    pick = local_rank >= 0 ? local_rank % n : 0;
    for (int i = 0; i < n && nearest && *nearest; i++)
        if (strcmp(dev.v.get_device_name(list[c[i].dev]), nearest) == 0) {
            pick = i;
            break;
        }
    {
        const char *name = dev.v.get_device_name(list[c[pick].dev]);
        struct ibv_port_attr pa;
        memset(&pa, 0, sizeof(pa));
        dev.ctx = dev.v.open_device(list[c[pick].dev]);
        if (!dev.ctx || dev.v.query_port(dev.ctx, (uint8_t)c[pick].port, &pa) != 0 ||
            !(dev.pd = dev.v.alloc_pd(dev.ctx))) {
            snprintf(why, size, "cannot open %s port %d", name, c[pick].port);
            if (dev.ctx)
                dev.v.close_device(dev.ctx);
            dev.v.free_device_list(list);
            return 0;
        }
        snprintf(dev.name, sizeof(dev.name), "%s:%d", name, c[pick].port);
        dev.port = (uint8_t)c[pick].port;
        dev.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET
                                                                  : IBV_LINK_LAYER_INFINIBAND;
        dev.mtu = (uint8_t)pa.active_mtu;
        dev.lid = pa.lid;
        dev.gid_index = -1;
        if (gid_env >= 0) {
            dev.gid_index = (int)gid_env;
            if (dev.v.query_gid(dev.ctx, dev.port, dev.gid_index, &dev.gid) != 0) {
                snprintf(why, size, "%s: TUTTI_IB_GID_INDEX=%d cannot be read", dev.name,
                         dev.gid_index);
                dev.v.free_device_list(list);
                return 0;
            }
        } else if (dev.link_layer == IBV_LINK_LAYER_ETHERNET) {
            dev.gid_index = pick_gid(&dev.v, dev.ctx, name, dev.port, pa.gid_tbl_len, &dev.gid);
            if (dev.gid_index < 0) {
                snprintf(why, size, "%s: RoCE port without a usable GID", dev.name);
                dev.v.free_device_list(list);
                return 0;
            }
        } else {
            dev.v.query_gid(dev.ctx, dev.port, 0, &dev.gid); /* for messages only */
        }
    }
    dev.v.free_device_list(list);
    return 1;
}

int tt_ib_probe(const char *nearest, int local_rank, char *name, size_t name_size, char *why,
                size_t why_size)
{
    pthread_mutex_lock(&probe_lock);
    if (!probed) {
        found = probe(nearest, local_rank, probe_why, sizeof(probe_why));
        probed = 1;
        if (found) {
            char g[64];
            TT_INFO(TT_SUB_IB, "net_ib: HCA %s, %s, LID %u, GID index %d (%s), MTU %d", dev.name,
                    dev.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", dev.lid,
                    dev.gid_index, tt_ib_gid_str(&dev.gid, g, sizeof(g)), 128 << dev.mtu);
        }
    }
    if (found)
        snprintf(name, name_size, "%s", dev.name);
    else
        snprintf(why, why_size, "%s", probe_why);
    pthread_mutex_unlock(&probe_lock);
    return found;
}
