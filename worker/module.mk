WORKER_SRCS += worker/worker.c
