// A track's rung learns its number and name from its folder's name, rungs/NN_name/:
// cmake/Stages.cmake (and python/conv_pool_ladder/_build.py, through it) compiles its source with
//   LADDER_RUNG_ID="NN"  LADDER_RUNG_NAME="name"  LADDER_RUNG_SYMBOL=rung_NN
// and the generated registry calls rung_NN(). The file defines
//   const Rung& LADDER_RUNG_SYMBOL() { ... r.id = LADDER_RUNG_ID; r.name = LADDER_RUNG_NAME; ... }
#pragma once

#if !defined(LADDER_RUNG_ID) || !defined(LADDER_RUNG_NAME) || !defined(LADDER_RUNG_SYMBOL)
#error "LADDER_RUNG_ID, LADDER_RUNG_NAME and LADDER_RUNG_SYMBOL are not all defined: a track's rung source is compiled by cmake/Stages.cmake (ladder_add_track_rungs) or python/conv_pool_ladder/_build.py, which derive them from its folder's name rungs/NN_name/"
#endif
