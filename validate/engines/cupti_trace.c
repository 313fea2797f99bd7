/* A kernel timeline of any CUDA program, for machines without Nsight Systems (the lent H200 has no nsys; KINDS.md).
 *
 * Loaded by the CUDA driver through CUDA_INJECTION64_PATH, it enables CUPTI's activity API for kernels, memcpys,
 * memsets and the runtime and driver API calls that launch or wait, and at exit writes one line per record to
 * CUPTI_TRACE_OUT (default cupti-trace.tsv):
 *   K  start_ns end_ns correlation stream graph name        a kernel's GPU interval (graph: 0 outside a CUDA graph)
 *   M  start_ns end_ns correlation stream bytes kind        a memcpy (kind: CUPTI's copy kind) / S a memset
 *   R  start_ns end_ns correlation thread cbid name         a runtime API call's host interval (D: a driver API call)
 * CUPTI's timestamps share one clock between host and GPU, so a step's host gaps read off against its kernels.
 * Build (on the machine; KREC: the newest CUpti_ActivityKernelN of that CUPTI's header):
 *   gcc -O2 -shared -fPIC -DKREC=CUpti_ActivityKernel9 -I$CUDA/include -I$CUPTI/include cupti_trace.c \
 *       -L$CUPTI/lib64 -lcupti -Wl,-rpath,$CUPTI/lib64 -o libcupti_trace.so
 * Read by validate/engines/kernel_trace.py (steps between synchronizations, per kernel name, the GPU's idle gaps).
 * CONCURRENT_KERNEL does not serialize kernels; each launch costs CUPTI some host time (measured in the run that uses
 * it: the same program with and without the injection).
 */
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KREC
#define KREC CUpti_ActivityKernel9
#endif

#define BUF_SIZE (8u << 20)  /* malloc's 16-byte alignment is more than CUPTI's 8 */

static FILE *out;

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = (uint8_t *)malloc(BUF_SIZE);
  *size = *buffer ? BUF_SIZE : 0;
  *max_records = 0;
}

static const char *api_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const char *name = NULL;
  if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name) return "?";
  return name;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  CUpti_Activity *rec = NULL;
  (void)ctx; (void)stream; (void)size;
  while (out && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      KREC *k = (KREC *)rec;
      fprintf(out, "K\t%llu\t%llu\t%u\t%u\t%u\t%s\n", (unsigned long long)k->start, (unsigned long long)k->end,
              k->correlationId, k->streamId, k->graphId, k->name ? k->name : "?");
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)rec;
      fprintf(out, "M\t%llu\t%llu\t%u\t%u\t%llu\t%u\n", (unsigned long long)m->start, (unsigned long long)m->end,
              m->correlationId, m->streamId, (unsigned long long)m->bytes, (unsigned)m->copyKind);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)rec;
      fprintf(out, "S\t%llu\t%llu\t%u\t%u\t%llu\t0\n", (unsigned long long)m->start, (unsigned long long)m->end,
              m->correlationId, m->streamId, (unsigned long long)m->bytes);
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)rec;
      int runtime = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
      fprintf(out, "%c\t%llu\t%llu\t%u\t%u\t%u\t%s\n", runtime ? 'R' : 'D', (unsigned long long)a->start,
              (unsigned long long)a->end, a->correlationId, a->threadId, (unsigned)a->cbid,
              api_name(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid));
      break;
    }
    default:
      break;
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped && out)
    fprintf(out, "X\t%zu\tdropped\n", dropped);
  free(buffer);
}

/* a context's records are flushed before it goes (a program may destroy it before atexit runs) */
static void CUPTIAPI on_resource(void *data, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *info) {
  (void)data; (void)info;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

static void finish(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (out) { fclose(out); out = NULL; }
}

int InitializeInjection(void) {
  const char *path = getenv("CUPTI_TRACE_OUT");
  out = fopen(path && *path ? path : "cupti-trace.tsv", "w");
  if (!out) { perror("cupti_trace: CUPTI_TRACE_OUT"); return 0; }
  if (cuptiActivityRegisterCallbacks(requested, completed) != CUPTI_SUCCESS) {
    fprintf(stderr, "cupti_trace: cuptiActivityRegisterCallbacks failed\n");
    return 0;
  }
  CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (cuptiActivityEnable(kinds[i]) != CUPTI_SUCCESS)
      fprintf(stderr, "cupti_trace: activity kind %d not enabled\n", (int)kinds[i]);
  CUpti_SubscriberHandle sub;
  if (cuptiSubscribe(&sub, (CUpti_CallbackFunc)on_resource, NULL) == CUPTI_SUCCESS)
    cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  atexit(finish);
  fprintf(stderr, "cupti_trace: tracing to %s\n", path && *path ? path : "cupti-trace.tsv");
  return 1;
}
