// expect 3:1 unsupported: function-like macro
#include <core.p4>
#define TWICE(x) ((x) + (x))
