/* topo.c -- rank records from hwloc and the layout derived from them; see topo.h. */
#include "lib/topo/topo.h"
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

#include "tutti_build.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#if TUTTI_HAVE_HWLOC
#include <hwloc.h>
#endif

static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static void cpuset_string(const cpu_set_t *set, char *buf, size_t size)
{
    size_t n = 0;

    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && n + 12 < size; c++) {
        int last = c;
        if (!CPU_ISSET(c, set))
            continue;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
            last++;
        n += (size_t)snprintf(buf + n, size - n, n ? ",%d" : "%d", c);
        if (last > c)
            n += (size_t)snprintf(buf + n, size - n, "-%d", last);
        c = last;
    }
}

/* Without hwloc (or beside it): the first interface that is up and not loopback. */
static void first_nic(char *name, size_t size)
{
    struct ifaddrs *ifs;

    name[0] = '\0';
    if (getifaddrs(&ifs) != 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
        if ((i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK) && i->ifa_addr) {
            snprintf(name, size, "%s", i->ifa_name);
            break;
        }
    freeifaddrs(ifs);
}

#if TUTTI_HAVE_HWLOC
static tutti_result_t load(hwloc_topology_t *topo, const char *xml);

/*
 * This process's topology (TUTTI_TOPO_FILE or the live machine), loaded once and kept: later
 * communicators skip the load, and hwloc's discovery plugins stay loaded, so leak checkers
 * can name the one that keeps an allocation (tests/integration/sanitize/lsan.supp).
 */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static hwloc_topology_t cached;

static tutti_result_t load_cached(hwloc_topology_t *topo, const char *xml)
{
    tutti_result_t rc = TUTTI_SUCCESS;

    pthread_mutex_lock(&cache_lock);
    if (!cached)
        rc = load(&cached, xml);
    *topo = cached;
    pthread_mutex_unlock(&cache_lock);
    return rc;
}

static tutti_result_t load(hwloc_topology_t *topo, const char *xml)
{
    if (hwloc_topology_init(topo) != 0)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "hwloc: cannot initialise a topology");
    hwloc_topology_set_io_types_filter(*topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (xml && *xml && hwloc_topology_set_xml(*topo, xml) != 0) {
        hwloc_topology_destroy(*topo);
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "TUTTI_TOPO_FILE=%s: hwloc cannot read it as an XML topology", xml);
    }
    if (hwloc_topology_load(*topo) != 0) {
        hwloc_topology_destroy(*topo);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "hwloc: cannot load the topology");
    }
    return TUTTI_SUCCESS;
}

/* NUMA node, nearest NIC and a GPU from hwloc, for the CPUs in `bound`. */
static void from_hwloc(hwloc_topology_t topo, hwloc_const_cpuset_t bound, struct tt_rank_info *me)
{
    hwloc_obj_t numa =
        hwloc_get_next_obj_covering_cpuset_by_type(topo, bound, HWLOC_OBJ_NUMANODE, NULL);
    hwloc_obj_t os = NULL;
    int best = -1;

    if (!numa) {
        hwloc_obj_t o = hwloc_get_obj_covering_cpuset(topo, bound);
        while (o && !o->memory_arity)
            o = o->parent;
        numa = o && o->memory_first_child ? o->memory_first_child : NULL;
    }
    me->numa = numa ? (int32_t)numa->os_index : -1;
    me->machine_cpus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    while ((os = hwloc_get_next_osdev(topo, os)) != NULL) {
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, os);
        int near = anc && hwloc_bitmap_intersects(anc->cpuset, bound);

        if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK ||
            os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
            int score = near * 2 + (os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS);
            if (score > best) {
                best = score;
                snprintf(me->nic, sizeof(me->nic), "%s", os->name);
            }
        } else if ((os->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU ||
                    os->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC) &&
                   !me->gpu_bus[0] && os->parent && os->parent->type == HWLOC_OBJ_PCI_DEVICE) {
            struct hwloc_pcidev_attr_s *p = &os->parent->attr->pcidev;
            snprintf(me->gpu_bus, sizeof(me->gpu_bus), "%04x:%02x:%02x.%x", p->domain, p->bus,
                     p->dev, p->func);
        }
    }
}
#endif

tutti_result_t tt_topo_self(struct tt_rank_info *me, int local_rank_hint, int rank)
{
    const char *hostid = tt_env_str("TUTTI_HOSTID");
    char name[64] = "unknown", boot_id[64] = "";
    cpu_set_t set;
    struct statvfs vfs;
    FILE *f;

    memset(me, 0, sizeof(*me));
    if (gethostname(name, sizeof(name)) != 0)
        snprintf(name, sizeof(name), "unknown");
    name[sizeof(name) - 1] = '\0';
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot_id, sizeof(boot_id), f))
            boot_id[0] = '\0';
        fclose(f);
    }
    me->machine_hash = fnv1a(fnv1a(0xcbf29ce484222325ull, name), boot_id);
    me->host_hash = *hostid ? fnv1a(0xcbf29ce484222325ull, hostid) : me->machine_hash;
    snprintf(me->host, sizeof(me->host), "%s", *hostid ? hostid : name);
    me->pid = (int32_t)getpid();
    me->local_rank_hint = local_rank_hint;
    me->numa = -1;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        CPU_SET(0, &set);
    me->ncpus = CPU_COUNT(&set);
    for (int cpu = 0; cpu < 64 * TT_CPUMASK_WORDS && cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &set))
            me->cpumask[cpu / 64] |= 1ull << (cpu % 64);
    me->machine_cpus = (int32_t)sysconf(_SC_NPROCESSORS_ONLN);
    if (statvfs("/dev/shm", &vfs) == 0) {
        unsigned long long mib = (unsigned long long)vfs.f_blocks * vfs.f_frsize >> 20;
        me->shm_mib = (int32_t)(mib > INT32_MAX ? INT32_MAX : mib);
    }
    cpuset_string(&set, me->cpuset, sizeof(me->cpuset));
#if TUTTI_HAVE_HWLOC
    {
        const char *xml = tt_env_str("TUTTI_TOPO_FILE"), *dump = tt_env_str("TUTTI_TOPO_DUMP_FILE");
        hwloc_topology_t topo;
        hwloc_bitmap_t bound = hwloc_bitmap_alloc();

        TT_CHECK(load_cached(&topo, xml));
        /* With a file, the binding of this process means nothing there: use the machine. */
        if (*xml || hwloc_get_cpubind(topo, bound, HWLOC_CPUBIND_PROCESS) != 0)
            hwloc_bitmap_copy(bound, hwloc_topology_get_topology_cpuset(topo));
        from_hwloc(topo, bound, me);
        if (*dump && rank == 0) {
            if (hwloc_topology_export_xml(topo, dump, 0) != 0)
                TT_WARN(TT_SUB_TOPO, "TUTTI_TOPO_DUMP_FILE=%s: cannot write it", dump);
            else
                TT_INFO(TT_SUB_TOPO, "topology written to %s", dump);
        }
        hwloc_bitmap_free(bound);
    }
#else
    (void)rank;
#endif
    if (!me->nic[0])
        first_nic(me->nic, sizeof(me->nic));
    TT_INFO(TT_SUB_TOPO, "host %s, NUMA node %d, CPUs %s (%d of %d), NIC %s, GPU %s", me->host,
            me->numa, me->cpuset, me->ncpus, me->machine_cpus, me->nic[0] ? me->nic : "none",
            me->gpu_bus[0] ? me->gpu_bus : "none");
    return TUTTI_SUCCESS;
}

/* qsort_r order for a node's ranks: NUMA node, then rank (records passed as context: two
 * communicators may be set up at once on different threads). */
static int ring_cmp(const void *a, const void *b, void *records)
{
    const struct tt_rank_info *all = records;
    int x = *(const int *)a, y = *(const int *)b;
    const struct tt_rank_info *p = &all[x], *q = &all[y];

    if (p->numa != q->numa)
        return p->numa < q->numa ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* CPUs the ranks on me's machine may run on together: the union of their affinity masks. */
static int machine_cores(const struct tt_rank_info *all, int n, int me)
{
    uint64_t cores[TT_CPUMASK_WORDS] = {0};
    int count = 0, wide = 0; /* wide: a rank may run on CPUs beyond the mask's 1024 */

    for (int r = 0; r < n; r++) {
        int in_mask = 0;
        if (all[r].machine_hash != all[me].machine_hash)
            continue;
        for (int i = 0; i < TT_CPUMASK_WORDS; i++) {
            cores[i] |= all[r].cpumask[i];
            in_mask += __builtin_popcountll(all[r].cpumask[i]);
        }
        wide |= in_mask < all[r].ncpus;
    }
    for (int i = 0; i < TT_CPUMASK_WORDS; i++)
        count += __builtin_popcountll(cores[i]);
    if (wide || count == 0)
        count = all[me].machine_cpus > 0 ? all[me].machine_cpus : all[me].ncpus;
    return count;
}

tutti_result_t tt_topo_derive(const struct tt_rank_info *all, int n, int me, struct tt_topo *t)
{
    int k = 0;

    memset(t, 0, sizeof(*t));
    t->nranks = n;
    t->node_of = malloc((size_t)n * sizeof(int));
    t->local_of = malloc((size_t)n * sizeof(int));
    t->node_size = calloc((size_t)n, sizeof(int));
    t->ring = malloc((size_t)n * sizeof(int));
    if (!t->node_of || !t->local_of || !t->node_size || !t->ring) {
        tt_topo_free(t);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "topology: out of memory for %d ranks", n);
    }
    /* Nodes in order of their lowest rank. */
    for (int r = 0; r < n; r++) {
        int node = -1;
        for (int q = 0; q < r && node < 0; q++)
            if (all[q].host_hash == all[r].host_hash)
                node = t->node_of[q];
        if (node < 0)
            node = t->nnodes++;
        t->node_of[r] = node;
        t->local_of[r] = t->node_size[node]++;
        t->machine_ranks += all[r].machine_hash == all[me].machine_hash;
    }
    t->machine_cores = machine_cores(all, n, me);
    t->uniform = 1;
    for (int i = 1; i < t->nnodes; i++)
        t->uniform &= t->node_size[i] == t->node_size[0];
    /* Ring: node by node; inside a node, ranks sharing a NUMA node next to each other. */
    for (int node = 0; node < t->nnodes; node++) {
        int first = k;
        for (int r = 0; r < n; r++)
            if (t->node_of[r] == node)
                t->ring[k++] = r;
        qsort_r(t->ring + first, (size_t)(k - first), sizeof(int), ring_cmp, (void *)all);
    }
    return TUTTI_SUCCESS;
}

void tt_topo_free(struct tt_topo *t)
{
    free(t->node_of);
    free(t->local_of);
    free(t->node_size);
    free(t->ring);
    memset(t, 0, sizeof(*t));
}

tutti_result_t tt_topo_print_machine(FILE *out, const char *xml)
{
#if TUTTI_HAVE_HWLOC
    hwloc_topology_t topo;
    hwloc_obj_t o = NULL;
    const char *file = xml ? xml : tt_env_str("TUTTI_TOPO_FILE");

    TT_CHECK(load(&topo, file));
    fprintf(out, "machine%s%s: %d package(s), %d NUMA node(s), %d core(s), %d PU(s)\n",
            *file ? " from " : "", file, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE),
            hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE),
            hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE),
            hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU));
    while ((o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o)) != NULL) {
        char cpus[128];
        hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), o->cpuset);
        fprintf(out, "  NUMA node %u: CPUs %s, %llu MiB\n", o->os_index, cpus,
                (unsigned long long)(o->attr->numanode.local_memory >> 20));
    }
    o = NULL;
    while ((o = hwloc_get_next_osdev(topo, o)) != NULL) {
        const char *kind = o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK       ? "NIC"
                           : o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS ? "HCA"
                           : o->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU         ? "GPU"
                           : o->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC      ? "GPU"
                                                                                : NULL;
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, o);
        char cpus[128] = "?";

        if (!kind)
            continue;
        if (anc)
            hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), anc->cpuset);
        fprintf(out, "  %s %s (near CPUs %s)\n", kind, o->name, cpus);
    }
    hwloc_topology_destroy(topo);
    return TUTTI_SUCCESS;
#else
    (void)xml;
    fprintf(out, "machine: %ld CPU(s) (built without hwloc: no NUMA or PCI detail)\n",
            sysconf(_SC_NPROCESSORS_ONLN));
    return TUTTI_SUCCESS;
#endif
}
