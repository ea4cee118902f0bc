// models/eval/gather_shards.h — sharded validation's second half: the statistics every rank
// collected on its share of the validation batches (ValidationOptions::shard) joined on rank 0,
// which then computes the metrics exactly as one process scoring the whole split would.
//
// Exactly, because the joined DetectionStats are the one-process vectors element for element:
// the shares are contiguous runs of the same batches, and rank r's entries are placed after
// those of ranks 0..r-1. ap_per_class sorts by confidence with ties kept in that order, so
// even tied confidences rank as they would in one process.
#pragma once

#include "engine/distributed/comm/communicator.h"
#include "models/eval/validate.h"

namespace bareyolo::models {

// Every rank calls it with its share's result (a collective: dist::allgather_varying). Rank 0's
// `result` then holds every rank's statistics, images and labels, in rank order, the summed
// confusion matrix, and the metrics of the whole; the other ranks' results are left as they were.
void gather_shards(dist::Communicator& comm, ValidationResult& result);

}  // namespace bareyolo::models
