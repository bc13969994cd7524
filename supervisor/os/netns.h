#pragma once

#include <stdint.h>
/* Make a network namespace with its loopback up (libnl-route-3), for later setns(2), and
 * return to home_fd (the caller's own, an nsfs fd). *ret: an nsfs fd of it. */
int netns_new_with_loopback(int home_fd, int *ret);
/* A TCP socket listening at 127.0.0.1:port inside the network namespace
 * netns_fd (close-on-exec), made there and back in home_fd's. *ret: its fd. */
int netns_listen_loopback(int netns_fd, int home_fd, uint16_t port, int *ret);
