// The one copy routine of puts and gets (CopyBytes) and its fence are
// declared with the direct route they serve (hpshmem/direct.h).
#pragma once

#include "hpshmem/direct.h"
