/**
 * The order in which a batch's groups are sent (SPEC §6 step 4): at most `maxConcurrency` groups per
 * wave, each group strictly one record after another. Groups of several records all start at once and
 * take turns (round robin, in age order of their heads); groups of one only fill the waves. A wide wave
 * (`take` with a larger width, used while the sink's sends finish at once) offers more lanes; the lanes
 * whose send did not start go back to the front of the queue (`putBack`).
 *
 * The turn queue holds a batch's records for the drainer and lets go of each as soon as it is settled: a
 * group leaves the list of groups when it starts, and a lane drops its record when it moves on
 * ({@link advance}). A settled record is then no longer reachable from the batch, and the garbage collector
 * frees it while the batch's other records are still in flight (see docs/design/drainer.md, "What a batch
 * holds").
 *
 * @since 0.1.0
 */
import type { OutboxRecord } from "../../domain/OutboxRecord.js"

/**
 * A started group: its records (one ordering key, age order) and the index of its next record. The records
 * before `next` are settled and let go (`undefined`); move on with {@link advance}.
 *
 * @since 0.1.0
 */
export interface Lane {
  readonly group: Array<OutboxRecord | undefined>
  next: number
}

/**
 * Moves a lane to its next record, letting go of the one it settled; returns whether a record is left.
 *
 * @since 0.2.0
 */
export const advance = (lane: Lane): boolean => {
  lane.group[lane.next] = undefined
  lane.next += 1
  return lane.next < lane.group.length
}

/**
 * The records of a lane from `from` on (none of them settled yet), in order.
 *
 * @since 0.2.0
 */
export const restOf = (lane: Lane, from: number): Array<OutboxRecord> => {
  const rest: Array<OutboxRecord> = []
  for (let i = from; i < lane.group.length; i++) {
    const record = lane.group[i]
    if (record !== undefined) rest.push(record)
  }
  return rest
}

/**
 * The groups of a batch as the turn queue takes them over: each group's records (one ordering key, age order),
 * a group leaving the list (`undefined`) when it starts and a record leaving its group when it is settled.
 *
 * @since 0.2.0
 */
export type Groups = Array<Array<OutboxRecord | undefined> | undefined>

/**
 * Puts the groups of several records first; each part keeps the age order of its heads.
 *
 * @since 0.1.0
 */
export const orderGroups = (grouped: ReadonlyArray<Array<OutboxRecord>>): Array<Array<OutboxRecord | undefined>> =>
  grouped.filter((g) => g.length > 1).concat(grouped.filter((g) => g.length <= 1))

/**
 * The turn queue of one batch over groups ordered by {@link orderGroups}. `take` returns the lanes of
 * the next wave; the lanes that go on after the wave come back through `requeue` and wait behind the
 * lanes that did not have a turn yet.
 *
 * @since 0.1.0
 */
export interface Turns {
  /**
   * The lanes of the next wave (empty when every group is done): at most `width` of them (default
   * `maxConcurrency`; groups of one fill the queue up to the width).
   */
  readonly take: (width?: number) => ReadonlyArray<Lane>
  /** Puts the lanes that go on after a wave at the end of the queue. */
  readonly requeue: (lanes: ReadonlyArray<Lane>) => void
  /** Puts lanes of a wave that did not have their turn (no send started) back at the front, in order. */
  readonly putBack: (lanes: ReadonlyArray<Lane>) => void
  /** The untried records: the rest of every started lane still queued, then every group not started. */
  readonly untried: () => Array<OutboxRecord>
  /** True when no lane is queued and no group is left to start. */
  readonly done: () => boolean
  /** Like `done`, without starting groups of one (the queue's order is left as it is). */
  readonly exhausted: () => boolean
}

/**
 * Builds the turn queue of a batch. It takes the list of groups over: each group leaves it when it starts.
 *
 * @since 0.1.0
 */
export const make = (groups: Groups, maxConcurrency: number): Turns => {
  let nextGroup = 0
  let queue: Array<Lane> = []
  // every group of several records starts at once; groups of one start only to fill a wave
  const fill = (width: number) => {
    for (;;) {
      const group = groups[nextGroup]
      if (group === undefined || (group.length <= 1 && queue.length >= width)) return
      // the lane holds the group from here on
      groups[nextGroup] = undefined
      nextGroup += 1
      if (group.length > 0) queue.push({ group, next: 0 })
    }
  }
  return {
    take: (width = maxConcurrency) => {
      fill(width)
      const turn = queue.slice(0, width)
      queue = queue.slice(width)
      return turn
    },
    requeue: (lanes) => {
      for (const lane of lanes) queue.push(lane)
    },
    putBack: (lanes) => {
      if (lanes.length > 0) queue = [...lanes, ...queue]
    },
    untried: () => {
      const rest: Array<OutboxRecord> = []
      for (const lane of queue) rest.push(...restOf(lane, lane.next))
      for (let g = nextGroup; g < groups.length; g++) {
        for (const record of groups[g] ?? []) if (record !== undefined) rest.push(record)
      }
      return rest
    },
    done: () => {
      fill(maxConcurrency)
      return queue.length === 0
    },
    exhausted: () =>
      queue.length === 0 && groups.slice(nextGroup).every((group) => group === undefined || group.length === 0)
  }
}
