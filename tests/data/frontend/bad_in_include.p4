// expect inc_bad.p4:4:5 undefined_t
#include <core.p4>
#include "inc_bad.p4"
