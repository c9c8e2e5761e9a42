/* ibemu_fabric.c -- the emulated fabric: per-process segments, addresses, shared CQs (ibemu.h). */
#include "ibemu.h"

pthread_mutex_t emu_lock = PTHREAD_MUTEX_INITIALIZER;
struct seg *emu_self;
static char self_name[64];
long emu_writes; /* RDMA emu_writes posted by this process (fault injection) */

/* Remote segments mapped so far. */
static struct {
    int32_t pid;
    struct seg *s;
} peers[256];
static int npeers;

int link_roce(void)
{
    const char *l = getenv("TUTTI_IBEMU_LINK");
    return !l || strcmp(l, "ib") != 0;
}

uint16_t lid_of(int32_t pid)
{
    return (uint16_t)(1 + (uint32_t)pid % 0xbffe); /* unicast LIDs */
}

/* GID index 0: fe80::<pid, 32 bits>; index 1 (RoCE): ::ffff:127.<pid, low 24 bits>. */
void gid_of(int32_t pid, int index, union ibv_gid *g)
{
    memset(g, 0, sizeof(*g));
    if (index == 0) {
        g->raw[0] = 0xfe;
        g->raw[1] = 0x80;
        g->raw[12] = (uint8_t)(pid >> 24);
    } else {
        g->raw[10] = g->raw[11] = 0xff;
        g->raw[12] = 127;
    }
    g->raw[13] = (uint8_t)(pid >> 16);
    g->raw[14] = (uint8_t)(pid >> 8);
    g->raw[15] = (uint8_t)pid;
}

int32_t pid_of_gid(const union ibv_gid *g)
{
    if (g->raw[0] == 0xfe)
        return (int32_t)((uint32_t)g->raw[12] << 24 | (uint32_t)g->raw[13] << 16 |
                         (uint32_t)g->raw[14] << 8 | g->raw[15]);
    return (int32_t)((uint32_t)g->raw[13] << 16 | (uint32_t)g->raw[14] << 8 | g->raw[15]);
}

static void seg_unlink(void)
{
    if (self_name[0])
        shm_unlink(self_name);
}

int alive(int32_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

/* Remove segments left by processes that died without unlinking theirs. */
static void sweep(void)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;

    if (!d)
        return;
    while ((e = readdir(d))) {
        int pid;
        char name[300];
        if (sscanf(e->d_name, "tutti-ibemu-%d", &pid) == 1 && !alive(pid)) {
            snprintf(name, sizeof(name), "/%s", e->d_name);
            shm_unlink(name);
        }
    }
    closedir(d);
}

int seg_create(void)
{
    int fd;

    if (emu_self)
        return 0;
    sweep();
    snprintf(self_name, sizeof(self_name), "/tutti-ibemu-%d", (int)getpid());
    fd = shm_open(self_name, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, sizeof(struct seg)) != 0) {
        close(fd);
        shm_unlink(self_name);
        return -1;
    }
    emu_self = mmap(NULL, sizeof(struct seg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (emu_self == MAP_FAILED) {
        emu_self = NULL;
        shm_unlink(self_name);
        return -1;
    }
    emu_self->pid = (int32_t)getpid();
    emu_self->lid = lid_of(emu_self->pid);
    emu_self->magic = SEG_MAGIC;
    atexit(seg_unlink);
#ifdef PR_SET_PTRACER
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* Yama: peers may write our memory */
#endif
    return 0;
}

/* The segment of process pid (mapped once), NULL if it has none. Called with `lock` held. */
struct seg *seg_of(int32_t pid)
{
    char name[64];
    struct seg *s;
    int fd;

    if (emu_self && pid == emu_self->pid)
        return emu_self;
    for (int i = 0; i < npeers; i++)
        if (peers[i].pid == pid)
            return peers[i].s;
    snprintf(name, sizeof(name), "/tutti-ibemu-%d", (int)pid);
    fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return NULL;
    s = mmap(NULL, sizeof(struct seg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s == MAP_FAILED || s->magic != SEG_MAGIC) {
        if (s != MAP_FAILED)
            munmap(s, sizeof(struct seg));
        return NULL;
    }
    if (npeers < 256) {
        peers[npeers].pid = pid;
        peers[npeers++].s = s;
    }
    return s;
}

/* The pid whose LID is lid: scan the segments of live processes. */
int32_t pid_of_lid(uint16_t lid)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int32_t found = -1;

    if (!d)
        return -1;
    while ((e = readdir(d))) {
        int pid;
        if (sscanf(e->d_name, "tutti-ibemu-%d", &pid) == 1 && lid_of(pid) == lid && alive(pid)) {
            found = pid;
            break;
        }
    }
    closedir(d);
    return found;
}

void cq_lock(struct seg_cq *q)
{
    int32_t me = (int32_t)getpid(), free_ = 0;
    for (;;) {
        int32_t holder;
        free_ = 0;
        if (atomic_compare_exchange_weak(&q->lock, &free_, me))
            return;
        holder = atomic_load(&q->lock);
        if (holder && !alive(holder)) /* died holding it */
            atomic_compare_exchange_strong(&q->lock, &holder, 0);
        sched_yield();
    }
}

void cq_unlock(struct seg_cq *q)
{
    atomic_store(&q->lock, 0);
}

/* Push a completion into a CQ (of any process). 0, or -1 if it is full. */
int cq_push(struct seg_cq *q, const struct ibv_wc *wc)
{
    int rc = 0;
    cq_lock(q);
    if (q->head - q->tail >= CQ_DEPTH)
        rc = -1;
    else
        q->ring[q->head++ % CQ_DEPTH] = *wc;
    cq_unlock(q);
    return rc;
}
