#pragma once
/* Make a network namespace with its loopback up (libnl-route-3), for later setns(2), and
 * return to home_fd (the caller's own, an nsfs fd). *ret: an nsfs fd of it. */
int netns_new_with_loopback(int home_fd, int *ret);
