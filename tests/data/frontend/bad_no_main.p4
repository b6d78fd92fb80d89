// expect no main package instantiation
#include <v1model.p4>
