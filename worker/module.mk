WORKER_SRCS += worker/worker.c
WORKER_SRCS += worker/worker-exec.c
