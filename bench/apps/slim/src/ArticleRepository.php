<?php

declare(strict_types=1);

namespace HearthBench\Slim;

/**
 * The app's data: articles kept in memory, seeded at boot (a stand-in for
 * the database layer a real app would configure at this point).
 */
final class ArticleRepository
{
    /** @var array<int, array{id:int,title:string,author:string,tags:list<string>,published:string}> */
    private array $articles = [];

    public function __construct(int $count)
    {
        for ($id = 1; $id <= $count; $id++) {
            $this->articles[$id] = [
                'id' => $id,
                'title' => "Article {$id}",
                'author' => ['ada', 'grace', 'linus', 'barbara'][$id % 4],
                'tags' => ['php', ['slim', 'psr-7', 'http'][$id % 3]],
                'published' => date('Y-m-d', 1700000000 + $id * 86400),
            ];
        }
    }

    /** @return list<array<string, mixed>> */
    public function latest(int $limit): array
    {
        return array_slice(array_values(array_reverse($this->articles, true)), 0, $limit);
    }

    /** @return array<string, mixed>|null */
    public function find(int $id): ?array
    {
        return $this->articles[$id] ?? null;
    }

    /** @param array<string, mixed> $data */
    public function add(array $data): array
    {
        $id = count($this->articles) + 1;
        return $this->articles[$id] = ['id' => $id] + $data;
    }

    public function count(): int
    {
        return count($this->articles);
    }
}
