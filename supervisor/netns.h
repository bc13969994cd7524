#pragma once
/* Bring the loopback interface of the current network namespace up (libnl-route-3). */
int netns_loopback_up(void);
/* Make a network namespace with its loopback up, for later setns(2), and
 * return to home_fd (the caller's own, an nsfs fd). *ret: an nsfs fd of it. */
int netns_new_with_loopback(int home_fd, int *ret);
