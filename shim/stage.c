// SPDX-License-Identifier: MIT
#include "stage.h"

/* The stages of the process (stage.h): the write-behind engine's, moved on by the service. */
struct pp_stage pp_stages[PP_STAGE_MAX];
