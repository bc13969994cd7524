#pragma once
/* Bring the loopback interface of the current network namespace up (libnl-route-3). */
int netns_loopback_up(void);
