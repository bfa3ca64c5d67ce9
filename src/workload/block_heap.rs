//! A binary min-heap kept in blocks of a fixed size instead of one vector that doubles: it grows
//! a block at a time and frees nothing when it grows. A doubling vector frees its old buffer at
//! every growth (half of the new one), and an allocator that keeps freed pages for a while
//! (jemalloc: 10 s) then counts them in the process's memory, as much again as the heap holds.

/// Entries a block holds: 4,096 of the timer's 24-byte entries is 96 KiB.
const BLOCK: usize = 4096;

/// The smallest element first, by `Ord`.
pub struct BlockHeap<T> {
    /// Each block's capacity is [`BLOCK`]; every block but the last is full.
    blocks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for BlockHeap<T> {
    fn default() -> Self {
        BlockHeap {
            blocks: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Ord> BlockHeap<T> {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn at(&self, i: usize) -> &T {
        &self.blocks[i / BLOCK][i % BLOCK]
    }

    fn swap(&mut self, i: usize, j: usize) {
        let (bi, bj) = (i / BLOCK, j / BLOCK);
        if bi == bj {
            self.blocks[bi].swap(i % BLOCK, j % BLOCK);
            return;
        }
        let (lo, hi, lo_at, hi_at) = if bi < bj {
            (bi, bj, i % BLOCK, j % BLOCK)
        } else {
            (bj, bi, j % BLOCK, i % BLOCK)
        };
        let (first, rest) = self.blocks.split_at_mut(hi);
        std::mem::swap(&mut first[lo][lo_at], &mut rest[0][hi_at]);
    }

    /// The smallest element.
    pub fn peek(&self) -> Option<&T> {
        self.blocks.first().and_then(|b| b.first())
    }

    pub fn push(&mut self, item: T) {
        match self.blocks.last_mut() {
            Some(b) if b.len() < BLOCK => b.push(item),
            _ => {
                let mut b = Vec::with_capacity(BLOCK);
                b.push(item);
                self.blocks.push(b);
            }
        }
        self.len += 1;
        let mut i = self.len - 1;
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.at(i) >= self.at(parent) {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
    }

    /// Takes the smallest element out.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let last = self.len - 1;
        self.swap(0, last);
        let item = self.blocks.last_mut().and_then(Vec::pop);
        if self.blocks.last().is_some_and(Vec::is_empty) {
            self.blocks.pop();
        }
        self.len = last;
        let mut i = 0;
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            if l < self.len && self.at(l) < self.at(least) {
                least = l;
            }
            if r < self.len && self.at(r) < self.at(least) {
                least = r;
            }
            if least == i {
                break;
            }
            self.swap(i, least);
            i = least;
        }
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_order_across_blocks_as_a_binary_heap_does() {
        // A scrambled sequence three blocks and more long, pushed and popped in turns.
        let n = 3 * BLOCK + 123;
        let items: Vec<u64> = (0..n as u64).map(|i| (i * 7_919) % 10_007).collect();
        let mut ours = BlockHeap::default();
        let mut theirs = std::collections::BinaryHeap::new();
        for (k, &x) in items.iter().enumerate() {
            ours.push(x);
            theirs.push(std::cmp::Reverse(x));
            if k % 5 == 0 {
                assert_eq!(ours.pop(), theirs.pop().map(|r| r.0));
            }
            assert_eq!(ours.len(), theirs.len());
            assert_eq!(ours.peek().copied(), theirs.peek().map(|r| r.0));
        }
        while let Some(x) = theirs.pop() {
            assert_eq!(ours.pop(), Some(x.0));
        }
        assert!(ours.is_empty());
        assert_eq!(ours.pop(), None);
        assert!(ours.blocks.is_empty(), "every block freed once empty");
    }

    #[test]
    fn a_full_block_is_never_grown_past_its_size() {
        let mut h = BlockHeap::default();
        for x in 0..(2 * BLOCK as u32 + 1) {
            h.push(x);
        }
        assert_eq!(h.blocks.len(), 3);
        assert!(h.blocks.iter().all(|b| b.capacity() == BLOCK));
    }
}
