// expect 4:1 macro TWICE takes 1 arguments, got 2
#include <core.p4>
#define TWICE(x) ((x) + (x))
const bit<8> y = TWICE(1, 2);
