/* The settings of the boxes set (sbxd.conf(5), core/box.h) that are not
 * plain numbers, and the template boxes are made from. Called by config.c
 * only; calls nothing of the model. Non-logging. */
#pragma once

#include "core/config.h"

/* The boxes' template: named BOX_TEMPLATE, reserved in [template NAME]. */
#define BOX_TEMPLATE "box"

/* box_image, box_idle_timeout_min, box_egress: 0 (set), < 0 (err says why), or 1: not a box key. */
int box_config_set(Config *cfg, const char *key, const char *value, char *err);
/* Append the boxes' template (made from the box_* settings) to cfg's templates. */
int box_template_add(Config *cfg);
