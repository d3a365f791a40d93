/* The dataset `precis run` uses when given none: the `default` preset, generated once into a cache
 * directory and reused while the cached file's suite text and generator match this build. */
#ifndef PRECIS_DEFAULT_DATASET_H
#define PRECIS_DEFAULT_DATASET_H

#include "base/status.h"

/* Cache directory: $PRECIS_CACHE_DIR, else $XDG_CACHE_HOME/precis, else $HOME/.cache/precis. */
precis_status precis_default_dataset_path(char **path);

#endif
