// expect 3:1 cannot find include file missing_file.p4
#include <v1model.p4>
#include "missing_file.p4"
